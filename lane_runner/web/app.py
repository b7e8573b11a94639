"""The console as one ASGI application (Starlette): its routes, templates and assets,
the access rules applied to each request, and the errors as pages or JSON.

Handlers that read the boards are plain functions, which Starlette runs in its worker
threads: a board read never holds the event loop, and the daemon's own loop (another
thread) is never touched. Every response says what it may load (a strict
Content-Security-Policy: the package's own script and style, nothing inline).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lane_runner.board.base import BoardError, Store
from lane_runner.cli.output import json_bytes
from lane_runner.config import Config
from lane_runner.errors import LaneRunnerError, NotFound, UsageError
from lane_runner.home import Home
from lane_runner.web import auth, text
from lane_runner.web.pulse import Boards, Pulse

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


@dataclass
class Console:
    """What every handler reads: the configuration, one board store for the console,
    the home, the access rules, the shared change poller and the templates."""

    cfg: Config
    store: Store
    home: Home
    gate: auth.Gate
    pulse: Pulse
    templates: jinja2.Environment


class NeedsSignIn(LaneRunnerError):
    """Reading needs the token (the console listens beyond loopback)."""


class Refused(LaneRunnerError):
    """A control without the token, or without its CSRF field."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def templates() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        finalize=text.shown,  # every {{ value }}: redacted, control characters inert
        undefined=jinja2.StrictUndefined,
    )
    environment.globals.update(when=text.when, ago=text.ago)
    return environment


def console_of(request: Request) -> Console:
    found: Console = request.app.state.console
    return found


def caller(request: Request) -> auth.Caller:
    console = console_of(request)
    return auth.caller(
        console.gate, request.headers.get("authorization"), request.cookies.get(auth.COOKIE)
    )


def reader(request: Request) -> auth.Caller:
    """The caller, who may read; NeedsSignIn when the console is bound beyond loopback
    and the request proves no token."""
    who = caller(request)
    if not auth.may_read(console_of(request).gate, who):
        raise NeedsSignIn("this console is reachable beyond this host: sign in to read it")
    return who


def controller(request: Request, csrf: str | None) -> auth.Caller:
    """The caller, who may use controls; Refused (401 or 403) saying why not."""
    who = caller(request)
    why = auth.control_refusal(console_of(request).gate, who, csrf)
    if why is not None:
        raise Refused(why, 401 if not who.signed_in else 403)
    return who


def by(request: Request) -> str:
    """Who a control is recorded as done by: the console and the client's address."""
    client = request.client.host if request.client else "unknown"
    return f"web console ({client})"


def json_response(document: Any, status: int = 200) -> Response:
    """JSON through the redaction gate, as ``--json`` prints it (``cli/output``)."""
    return Response(json_bytes(document, indent=False), status, media_type="application/json")


def page(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
    """A template as a whole page, or only its ``<main>`` for the live update's fetch."""
    console = console_of(request)
    who = caller(request)
    values.setdefault("said", request.query_params.get("said"))
    html = console.templates.get_template(name).render(
        partial=request.headers.get("x-console-part") == "main",
        signed_in=who.signed_in,
        csrf=console.gate.csrf(who.nonce) if who.nonce else "",
        token_configured=console.gate.token is not None,
        path=request.url.path,
        **values,
    )
    return HTMLResponse(html, status)


def _api(request: Request) -> bool:
    """Whether the request is a script's or a stream's (JSON errors), not a page's."""
    path = request.url.path
    return path.startswith("/api/") or path == "/events" or path.endswith("/log/events")


def _error(request: Request, status: int, message: str) -> Response:
    if _api(request):
        return json_response({"error": message}, status)
    return page(request, "error.html", status, title=f"{status}", message=message)


async def _lane_runner_error(request: Request, error: Exception) -> Response:
    if isinstance(error, NeedsSignIn):
        if _api(request):
            return json_response({"error": str(error)}, 401)
        return RedirectResponse(f"/login?next={request.url.path}", 303)
    if isinstance(error, Refused):
        return _error(request, error.status, str(error))
    if isinstance(error, NotFound):
        return _error(request, 404, str(error))
    if isinstance(error, UsageError):
        return _error(request, 409, str(error))
    if isinstance(error, BoardError):
        return _error(request, 503, f"the board cannot be read now: {error}")
    log.warning("web console: %s on %s", error, request.url.path)
    return _error(request, 500, str(error))


class _Headers:
    """Adds ``SECURITY_HEADERS`` to every response (plain ASGI: streams pass untouched)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, sending)


def build(cfg: Config, store: Store, gate: auth.Gate) -> Starlette:
    """The application over ``store`` (the caller closes it after the server stops)."""
    from lane_runner.web import api, events, pages  # the routes import this module's helpers

    home = Home(cfg.home)
    app = Starlette(
        routes=[
            *pages.ROUTES,
            *api.ROUTES,
            *events.ROUTES,
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(_Headers)],
        exception_handlers={LaneRunnerError: _lane_runner_error},
    )
    app.state.console = Console(cfg, store, home, gate, Pulse(Boards(store, home)), templates())
    return app
