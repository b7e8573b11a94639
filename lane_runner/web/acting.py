"""What a control does, from its request and its fields: the JSON API (``api.py``) and
the form pages (``pages.py``) differ only in where the fields and the CSRF token come
from and in what they answer, so each control's effect is written here once."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from lane_runner.errors import NotFound
from lane_runner.web import controls
from lane_runner.web.app import by, console_of


async def on_task(request: Request, fields: dict[str, str]) -> str:
    """The task control the path names (retry, stop, approve, deny), carried out."""
    console = console_of(request)
    slug, task_id = request.path_params["board"], request.path_params["task"]
    name = request.path_params["control"]
    return await run_in_threadpool(
        lambda: controls.act_on_task(
            console.cfg, console.store.board(slug), task_id, name, fields, by(request))
    )


async def on_board(request: Request, fields: dict[str, str]) -> str:
    """The board's pause (with the fields' reason) or resume."""
    store, control = console_of(request).store, request.path_params["control"]
    if control not in ("pause", "resume"):
        raise NotFound(f"no board control {control!r}: pause or resume")
    board = await run_in_threadpool(store.board, request.path_params["board"])
    if control == "pause":
        reason = fields.get("reason", "").strip()
        return await run_in_threadpool(controls.pause_board, board, reason, by(request))
    return await run_in_threadpool(controls.resume_board, board)


def on_runner(request: Request, fields: dict[str, str], pausing: bool) -> str:
    """This runner's pause (with the fields' reason) or resume."""
    home = console_of(request).home
    if pausing:
        return controls.pause_runner(home, fields.get("reason", "").strip(), by(request))
    return controls.resume_runner(home)
