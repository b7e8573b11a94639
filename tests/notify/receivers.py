"""Loopback receivers notifications are sent to: an HTTP server for Apprise's
``json://`` (it can be told to fail its next N requests) and an SMTP server (aiosmtpd)
for ``mailto://``."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    payload: dict[str, Any]
    headers: dict[str, str]


@dataclass
class HttpReceiver:
    """What arrived (each request, failed ones too) and how many next requests fail."""

    port: int = 0
    posts: list[Received] = field(default_factory=list)
    failures: list[Received] = field(default_factory=list)
    fail_next: int = 0
    holding: bool = False
    """True: each request is recorded, then answered only once ``release`` is set."""
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def ids(self) -> list[str]:
        with self.lock:
            return [post.payload["id"] for post in self.posts]


@contextmanager
def http_receiver(port: int = 0) -> Iterator[HttpReceiver]:
    receiver = HttpReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length", "0"))
            got = Received(json.loads(self.rfile.read(length)), dict(self.headers.items()))
            with receiver.lock:
                failing = receiver.fail_next > 0
                receiver.fail_next -= failing
                (receiver.failures if failing else receiver.posts).append(got)
            if receiver.holding:
                receiver.release.wait(60)
            self.send_response(503 if failing else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A loopback port nothing listens on now (for a receiver started later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class SmtpReceiver:
    port: int
    messages: list[Any] = field(default_factory=list)

    def url(self, to: str = "ops@example.test") -> str:
        return f"mailto://127.0.0.1:{self.port}?from=lanes@example.test&to={to}"


@contextmanager
def smtp_receiver() -> Iterator[SmtpReceiver]:
    from aiosmtpd.controller import Controller

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
            received.messages.append(message_from_bytes(envelope.content))
            return "250 OK"

    port = free_port()  # aiosmtpd checks its port by connecting to it: name one
    received = SmtpReceiver(port)
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield received
    finally:
        controller.stop()
