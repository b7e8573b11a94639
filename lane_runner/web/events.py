"""Server-sent event streams: ``/events`` says when the boards changed (``pulse``), and
a running task's ``/log/events`` sends the lines its log gains. ``static/console.js``
listens; a page without it reads the same data on reload.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from lane_runner.board.model import Status
from lane_runner.errors import NotFound
from lane_runner.web import logtail
from lane_runner.web.app import console_of, reader

#: Seconds between looks at a followed log.
LOG_LOOK = 0.5
#: Looks at a followed log between asking the board whether its task still runs.
RUN_LOOKS = 4
HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}


def _message(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"


async def changes(request: Request) -> Response:
    reader(request)
    pulse = console_of(request).pulse

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 3000\n\n"
        async for version in pulse.listen():
            yield b": keep-alive\n\n" if version is None else _message("change", version)

    return StreamingResponse(stream(), media_type="text/event-stream", headers=HEADERS)


async def log_lines(request: Request) -> Response:
    """The lines a task's log gains while the task runs; ``end`` once it does not."""
    reader(request)
    console = console_of(request)
    slug, task_id = request.path_params["board"], request.path_params["task"]
    board = await asyncio.to_thread(console.store.board, slug)
    await asyncio.to_thread(board.get_task, task_id)  # NotFound before the stream starts
    follower = logtail.Follower(console.home.log_file(slug, task_id))

    async def running() -> bool:
        try:
            task = await asyncio.to_thread(board.get_task, task_id)
        except NotFound:
            return False
        return task.status in (Status.RUNNING, Status.READY)

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 3000\n\n"
        looks = 0
        while True:
            lines = await asyncio.to_thread(follower.read)
            if lines:
                yield _message("lines", lines)
            looks += 1
            if looks % RUN_LOOKS == 0 and not await running():
                yield _message("lines", await asyncio.to_thread(follower.read))
                yield _message("end", task_id)
                return
            await asyncio.sleep(LOG_LOOK)

    return StreamingResponse(stream(), media_type="text/event-stream", headers=HEADERS)


ROUTES = [
    Route("/events", changes),
    Route("/boards/{board}/tasks/{task}/log/events", log_lines),
]

