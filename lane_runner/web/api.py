"""``/api/v1``: what the pages show, as JSON (docs/console.md, "API"), and the controls
for scripts (``Authorization: Bearer``). Every document passes the redaction gate
(``app.json_response``). Times are Unix seconds here, ages and time left in seconds.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lane_runner.cli.commands import status_cmd
from lane_runner.cli.tasks import comment_document, event_document, run_document, task_document
from lane_runner.errors import NotFound, UsageError
from lane_runner.web import acting, boards, costs, inflight
from lane_runner.web.app import console_of, controller, json_response, reader

#: The largest JSON body a control reads.
MAX_BODY_BYTES = 64 * 1024
CSRF_HEADER = "x-csrf-token"


def state(request: Request) -> Response:
    """``status --json`` with the runs in flight as the console adds to them."""
    reader(request)
    console = console_of(request)
    now = time.time()
    document = status_cmd.collect(console.cfg, now)
    document["runs"] = [f.to_dict() for f in inflight.flights(console.store, console.home, now)]
    return json_response(document)


def _board_document(view: boards.BoardView) -> dict[str, Any]:
    return {
        "board": view.slug,
        "error": view.error,
        "paused": None if view.paused is None else asdict(view.paused),
        "archived": view.archived,
        "columns": {
            str(column.status): {
                "count": column.count,
                "tasks": [task_document(task) for task in column.cards],
                "more": column.more,
            }
            for column in view.columns
        },
    }


def board_list(request: Request) -> Response:
    reader(request)
    found = boards.overview(console_of(request).store, boards.Filters.of(request.query_params))
    return json_response({"boards": [_board_document(view) for view in found.boards]})


def board(request: Request) -> Response:
    reader(request)
    slug = request.path_params["board"]
    filters = boards.Filters.of({**request.query_params, "board": slug})
    found = boards.overview(console_of(request).store, filters)
    if not found.boards:
        raise NotFound(f"no board {slug!r}")
    return json_response(_board_document(found.boards[0]))


def task(request: Request) -> Response:
    reader(request)
    console = console_of(request)
    view = boards.task_view(console.cfg, console.store, console.home, request.path_params["board"],
                            request.path_params["task"], time.time())
    return json_response({
        **task_document(view.task),
        "runs": [run_document(run) for run in view.runs],
        "events": [event_document(event) for event in view.events],
        "comments": [comment_document(comment) for comment in view.comments],
        "delivery": view.delivery,
        "backoff": view.backoff,
        "usage": view.usage,
        "evidence": view.evidence,
        "controls": list(view.controls),
    })


def run(request: Request) -> Response:
    """One run as the board has it, and what the daemon of this home says of it while it
    runs (``flight``: turn, tokens so far, last message, session, heartbeat age)."""
    reader(request)
    console = console_of(request)
    slug, run_id = request.path_params["board"], request.path_params["run"]
    found = console.store.board(slug).get_run(run_id)
    flight = next((f for f in inflight.flights(console.store, console.home, time.time())
                   if f.board == slug and f.run_id == run_id), None)
    return json_response({**run_document(found), "flight": None if flight is None
                          else flight.to_dict()})


def usage(request: Request) -> Response:
    reader(request)
    console = console_of(request)
    days = request.query_params.get("days", str(costs.DEFAULT_DAYS))
    if not days.isdigit() or not 1 <= int(days) <= 366:
        raise UsageError(f"days {days!r}: expected a whole number from 1 to 366")
    spent = costs.costs(console.store, console.home, time.time(), int(days))
    return json_response({"since": spent.since, **spent.rows, "total": spent.total})


async def _body(request: Request) -> dict[str, str]:
    data = await request.body()
    if not data:
        return {}
    if len(data) > MAX_BODY_BYTES:
        raise UsageError(f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        found = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise UsageError(f"the body is not JSON: {error}") from None
    if not isinstance(found, dict):
        raise UsageError("the body must be a JSON object of text fields")
    return {str(name): str(value) for name, value in found.items()}


async def task_control(request: Request) -> Response:
    controller(request, request.headers.get(CSRF_HEADER))
    return json_response({"message": await acting.on_task(request, await _body(request))})


async def board_control(request: Request) -> Response:
    controller(request, request.headers.get(CSRF_HEADER))
    return json_response({"message": await acting.on_board(request, await _body(request))})


async def runner_control(request: Request) -> Response:
    controller(request, request.headers.get(CSRF_HEADER))
    said = acting.on_runner(request, await _body(request), request.url.path.endswith("/pause"))
    return json_response({"message": said})


ROUTES = [
    Route("/api/v1/state", state),
    Route("/api/v1/boards", board_list),
    Route("/api/v1/usage", usage),
    Route("/api/v1/boards/{board}", board),
    Route("/api/v1/boards/{board}/tasks/{task}", task),
    Route("/api/v1/boards/{board}/runs/{run:int}", run),
    Route("/api/v1/boards/{board}/tasks/{task}/{control}", task_control, methods=["POST"]),
    Route("/api/v1/boards/{board}/{control}", board_control, methods=["POST"]),
    Route("/api/v1/pause", runner_control, methods=["POST"]),
    Route("/api/v1/resume", runner_control, methods=["POST"]),
]
