"""The console's pages: the boards, a task, the runs in flight, usage, health, and the
login form; and the controls' form posts, which answer with a redirect to the page the
form was on (the message in its query) or a page saying why they were refused.

Reading works without JavaScript; ``static/console.js`` swaps in a page's fresh
``<main>`` when the boards change (``events``) and follows a running task's log.
"""

from __future__ import annotations

import time
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from lane_runner.board.model import Status
from lane_runner.cli.commands import logs_cmd, status_cmd
from lane_runner.errors import NotFound
from lane_runner.web import acting, auth, boards, charts, costs, inflight, logtail
from lane_runner.web.app import console_of, controller, page, reader

#: The largest form a control or the login reads.
MAX_FORM_BYTES = 64 * 1024


def board_page(request: Request) -> Response:
    reader(request)
    console = console_of(request)
    found = boards.overview(console.store, boards.Filters.of(request.query_params))
    return page(request, "boards.html", title="Boards", overview=found,
                said=request.query_params.get("said"))


def task_page(request: Request) -> Response:
    reader(request)
    console = console_of(request)
    slug, task_id = request.path_params["board"], request.path_params["task"]
    view = boards.task_view(console.cfg, console.store, console.home, slug, task_id, time.time())
    try:
        lines = logtail.tail(logs_cmd.log_path(console.home, task_id, slug))
    except NotFound:
        lines = []
    flight = next((f for f in inflight.flights(console.store, console.home, time.time())
                   if f.board == slug and f.task_id == task_id), None)
    return page(request, "task.html", title=f"{slug}/{task_id}", view=view, log_lines=lines,
                flight=flight, running=view.task.status is Status.RUNNING,
                said=request.query_params.get("said"))


def runs_page(request: Request) -> Response:
    reader(request)
    console = console_of(request)
    return page(request, "runs.html", title="Runs in flight",
                flights=inflight.flights(console.store, console.home, time.time()),
                daemon=inflight.daemon(console.home))


def usage_page(request: Request) -> Response:
    reader(request)
    console = console_of(request)
    spent = costs.costs(console.store, console.home, time.time())
    drawn = [
        charts.horizontal("Dollars per day", spent.bars("day", "cost_usd"), "$"),
        charts.horizontal("Tokens per day", spent.bars("day", "total_tokens"), "tokens"),
        charts.horizontal("Dollars per board", spent.bars("board", "cost_usd"), "$"),
        charts.horizontal("Dollars per provider", spent.bars("provider", "cost_usd"), "$"),
        charts.horizontal("Tokens per provider", spent.bars("provider", "total_tokens"), "tokens"),
    ]
    return page(request, "usage.html", title="Usage", spent=spent, charts=drawn)


def health_page(request: Request) -> Response:
    reader(request)
    console = console_of(request)
    state = status_cmd.collect(console.cfg, time.time())
    return page(request, "health.html", title="Health", state=state,
                said=request.query_params.get("said"))


def login_page(request: Request) -> Response:
    after = _local(request.query_params.get("next"))
    return page(request, "login.html", title="Sign in", next=after, message=None)


async def login(request: Request) -> Response:
    form = await request.form(max_fields=4, max_part_size=MAX_FORM_BYTES)
    console = console_of(request)
    given, after = str(form.get("token", "")), _local(str(form.get("next", "/")))
    if not console.gate.token_matches(given):
        why = ("no token is configured: the console is read-only"
               if console.gate.token is None else "that is not the console's token")
        return page(request, "login.html", 401, title="Sign in", next=after, message=why)
    response = RedirectResponse(after, 303)
    response.set_cookie(auth.COOKIE, console.gate.new_session(), httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return response


async def logout(request: Request) -> Response:
    response = RedirectResponse("/", 303)
    response.delete_cookie(auth.COOKIE)
    return response


def _local(target: str | None) -> str:
    """A redirect target on this console only (never another site's)."""
    parts = urlsplit(target or "/")
    if parts.scheme or parts.netloc or not parts.path.startswith("/"):
        return "/"
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _back(to: str, message: str) -> Response:
    return RedirectResponse(f"{to}?said={quote(message)}", 303)


async def _fields(request: Request) -> dict[str, str]:
    form = await request.form(max_fields=16, max_part_size=MAX_FORM_BYTES)
    return {name: str(value) for name, value in form.items()}


async def task_control(request: Request) -> Response:
    fields = await _fields(request)
    controller(request, fields.get(auth.CSRF_FIELD))
    said = await acting.on_task(request, fields)
    path = request.path_params
    return _back(f"/boards/{path['board']}/tasks/{path['task']}", said)


async def board_control(request: Request) -> Response:
    fields = await _fields(request)
    controller(request, fields.get(auth.CSRF_FIELD))
    return _back("/", await acting.on_board(request, fields))


async def runner_control(request: Request) -> Response:
    fields = await _fields(request)
    controller(request, fields.get(auth.CSRF_FIELD))
    return _back("/health", acting.on_runner(request, fields, request.url.path == "/pause"))


ROUTES = [
    Route("/", board_page),
    Route("/boards/{board}/tasks/{task}", task_page),
    Route("/boards/{board}/tasks/{task}/{control}", task_control, methods=["POST"]),
    Route("/boards/{board}/{control:str}", board_control, methods=["POST"]),
    Route("/runs", runs_page),
    Route("/usage", usage_page),
    Route("/health", health_page),
    Route("/pause", runner_control, methods=["POST"]),
    Route("/resume", runner_control, methods=["POST"]),
    Route("/login", login_page),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
