"""``lane-runner web``: the web console in the foreground (docs/console.md).

The daemon serves the same console on its own thread when ``web_listen`` is set;
this command serves it from any process that reads the home and the boards (a second
machine of a shared PostgreSQL board, a laptop beside a running daemon).
"""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from lane_runner import extras
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.config import Config, listen_address
from lane_runner.errors import UsageError

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:8480"


def register(subparsers: Any) -> None:
    web = subparsers.add_parser(
        "web", help="the web console: boards, runs, usage, health, and the controls"
    )
    web.add_argument(
        "--listen", help=f"HOST:PORT to serve on (default: web_listen, else {DEFAULT_LISTEN}); "
        "beyond loopback, reading needs the token too",
    )
    add_json_flag(web)
    web.set_defaults(handler=serve_web)


def _server_module() -> ModuleType:
    """``lane_runner.web.server``, or a UsageError saying how to install the extra."""
    try:
        return importlib.import_module("lane_runner.web.server")
    except ImportError as error:
        raise UsageError(
            f"the web console needs the 'web' extra ({error.name} is missing): "
            f"{extras.install_hint('web')}"
        ) from None


def serve_web(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    listen = args.listen or cfg.web_listen or DEFAULT_LISTEN
    try:
        listen_address(listen)
    except ValueError as error:
        raise UsageError(f"--listen {listen!r}: {error}") from None
    server = _server_module()
    try:
        server.serve(cfg, listen, as_json=args.json)
    except OSError as error:
        raise UsageError(f"cannot listen on {listen}: {error.strerror or error}") from None
    return 0


@contextmanager
def beside_the_daemon(cfg: Config) -> Iterator[None]:
    """The console on its own thread while the daemon serves, when ``web_listen`` says
    where; nothing otherwise. A port that cannot be bound stops the start (exit 2): an
    operator who asked for the console is told at once, not by a missing page later."""
    if not cfg.web_listen:
        yield
        return
    server = _server_module()
    try:
        console = server.Background(cfg, cfg.web_listen)
    except OSError as error:
        raise UsageError(
            f"web_listen {cfg.web_listen}: cannot listen there ({error.strerror or error})"
        ) from None
    log.info("web console on %s", console.url)
    try:
        yield
    finally:
        console.close()
