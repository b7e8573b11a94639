"""A real model router stand-in: a loopback HTTP server answering from a script."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from lane_runner import config
from lane_runner.router import deadline
from lane_runner.router.http import HttpRouter


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"{}"
    delay: float = 0.0
    trickle: float = 0.0  # > 0: send the whole response one byte per this many seconds


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (the router's timeouts, a closed keep-alive) is no error
        of the stand-in's; anything else is printed as usual."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class ScriptedRouter:
    """Serves ``replies`` in order and records every request it received."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self._server = LoopbackServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}/v1/chat/completions"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def reply(
        self,
        status: int = 200,
        body: bytes = b"{}",
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        trickle: float = 0.0,
    ) -> None:
        self.replies.append(Reply(status, headers or {}, body, delay, trickle))

    def select(self, target: str, rationale: str = "", content: str | None = None) -> None:
        """Answer with ``target`` in the selection header and optionally ``content`` in the body."""
        headers = {"x-model-router-selected-model": target}
        if rationale:
            headers["x-model-router-rationale"] = rationale
        body = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        self.reply(body=json.dumps(body).encode(), headers=headers)

    def say(self, content: str) -> None:
        """Answer with a chat completion whose message content is ``content`` (the judge)."""
        self.reply(body=json.dumps({"choices": [{"message": {"content": content}}]}).encode())

    def models(self) -> list[str]:
        return [request["json"]["model"] for request in self.requests]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                scripted.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "json": json.loads(raw)}
                )
                reply = (
                    scripted.replies.popleft()
                    if scripted.replies
                    else Reply(500, body=b"no script")
                )
                time.sleep(reply.delay)
                if reply.trickle:
                    self._trickle(reply)
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left: exactly what the timeout test provokes

            def _trickle(self, reply: Reply) -> None:
                """A router that never stalls long enough for a per-read timeout to fire."""
                head = f"HTTP/1.1 {reply.status} OK\r\n" + "".join(
                    f"{name}: {value}\r\n" for name, value in reply.headers.items()
                )
                raw = (head + f"content-length: {len(reply.body)}\r\n\r\n").encode()
                try:
                    for byte in raw + reply.body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(reply.trickle)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on the trickle: what the deadline tests provoke

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test asserts on ``requests`` instead."""

        return Handler


@pytest.fixture
def server() -> Iterator[ScriptedRouter]:
    scripted = ScriptedRouter()
    yield scripted
    scripted.close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    """The daemon's kind of client: its connections honour the routing call's deadline."""
    with deadline.client(2, httpx.Timeout(5.0)) as http:
        yield http


@pytest.fixture
def router(server: ScriptedRouter, client: httpx.Client) -> HttpRouter:
    """A router on a host with codex and claude installed: each hands over to the other."""
    return HttpRouter(server.url, client, timeout=5.0, retries=2, backoff=0.01,
                      usable=("codex", "claude"))


@pytest.fixture
def cfg(tmp_path: Path) -> config.Config:
    return config.load(tmp_path, environ={})
