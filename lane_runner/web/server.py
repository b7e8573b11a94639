"""The console served: in the foreground (``lane-runner web``), or on a thread of its
own beside the daemon (``web_listen``), with its own event loop and board store, so a
page never waits on the daemon's loop and the daemon's loop never waits on a page.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from contextlib import closing

import orjson
import uvicorn

from lane_runner.board import open_store
from lane_runner.board.base import Store
from lane_runner.config import Config, listen_address
from lane_runner.web import auth
from lane_runner.web.app import build

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:8480"
#: Seconds a stopping console gives open streams before it closes them.
GRACE = 1


def _server(
    cfg: Config, listen: str, sock: socket.socket
) -> tuple[uvicorn.Server, str, Store]:
    host, _ = listen_address(listen)
    gate = auth.Gate(auth.environment_token(cfg.web_token_file), auth.loopback(host))
    store = open_store(cfg)
    app = build(cfg, store, gate)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off",
        timeout_graceful_shutdown=GRACE, server_header=False,
    )
    address, port = sock.getsockname()[:2]
    shown = f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"
    return uvicorn.Server(config), shown, store


def bind(listen: str) -> socket.socket:
    """The listening socket, bound now: a taken port is an error at start, not later."""
    host, port = listen_address(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    os.set_inheritable(sock.fileno(), False)
    return sock


def serve(cfg: Config, listen: str, *, as_json: bool = False) -> None:
    """Serve in the foreground until Ctrl-C or SIGTERM (uvicorn's own handlers); the
    address served on is said first (one JSON line with ``as_json``: a script that asked
    for port 0 learns the port)."""
    with closing(bind(listen)) as sock:
        server, shown, store = _server(cfg, listen, sock)
        print(orjson.dumps({"url": shown}).decode() if as_json else f"web console on {shown}",
              flush=True)
        try:
            server.run(sockets=[sock])
        finally:
            store.close()


class Background:
    """The console on a daemon thread of its own; ``close`` stops it and its store."""

    def __init__(self, cfg: Config, listen: str) -> None:
        self.sock = bind(listen)
        self.server, self.url, self.store = _server(cfg, listen, self.sock)
        self.thread = threading.Thread(target=self._run, name="web-console", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self.sock]))
        except Exception:  # noqa: BLE001 - the console is optional; the work goes on
            log.exception("the web console stopped; the daemon goes on without it")

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=GRACE + 5)
        self.sock.close()
        self.store.close()
