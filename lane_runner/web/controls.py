"""The controls the command line has, for the console: a task's retry and stop, a
board's and the runner's pause and resume (docs/console.md, "Controls").

Each is one board call, the same one its command makes (``task retry``, ``task stop``,
``task approve``, ``task deny``, ``pause``, ``resume``), so a control from the console
is no different on the board. Task controls are a registry: the task page and the API
offer whatever applies to the task in front of them under the console's configuration
(whether a task waits for approval depends on its board's ``approval``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lane_runner.board.base import Board
from lane_runner.board.model import Status, Task
from lane_runner.config import Config
from lane_runner.errors import NotFound, UsageError
from lane_runner.home import Home
from lane_runner.service import approvals, pause

#: A form's or a JSON body's fields, as text.
Fields = Mapping[str, str]


@dataclass(frozen=True)
class TaskControl:
    """One thing an operator may do to a task: when it applies, and what it does (the
    message it returns is shown to the operator)."""

    name: str
    label: str
    applies: Callable[[Config, Task], bool]
    act: Callable[[Config, Board, Task, Fields, str], str]


TASK_CONTROLS: dict[str, TaskControl] = {}


def register(control: TaskControl) -> None:
    """Offer ``control`` on every task it applies to."""
    TASK_CONTROLS[control.name] = control


def applicable(cfg: Config, task: Task) -> tuple[str, ...]:
    return tuple(name for name, control in TASK_CONTROLS.items() if control.applies(cfg, task))


def _retry(cfg: Config, board: Board, task: Task, fields: Fields, by: str) -> str:
    comment = fields.get("comment", "").strip() or "retried from the web console"
    done = board.retry(task.id, comment, author=by)
    return f"{done.board}/{done.id} retried: now {done.status}"


def _stop(cfg: Config, board: Board, task: Task, fields: Fields, by: str) -> str:
    reason = fields.get("reason", "").strip() or f"stopped from the web console by {by}"
    requeue = fields.get("requeue", "") in ("on", "true", "1")
    run = board.request_stop(task.id, reason, requeue=requeue)
    return (f"stop requested for {task.board}/{task.id} run {run.id}; its runner ends it "
            "at its next heartbeat")


def _approve(cfg: Config, board: Board, task: Task, fields: Fields, by: str) -> str:
    """``task approve``: the second factor's code checked when one is configured."""
    step = approvals.check_code(cfg, fields.get("code", "").strip() or None, time.time())
    done = board.approve(task.id, by, fields.get("note", "").strip(), step)
    return f"{done.board}/{done.id} approved by {done.decided_by}"


def _deny(cfg: Config, board: Board, task: Task, fields: Fields, by: str) -> str:
    reason = fields.get("reason", "").strip()
    if not reason:
        raise UsageError("deny: say why (the reason is recorded and shown on the task)")
    done = board.deny(task.id, by, reason)
    return f"{done.board}/{done.id} denied by {done.decided_by}: now {done.status}"


def _waits(cfg: Config, task: Task) -> bool:
    return approvals.awaiting(cfg, task) is not None


register(TaskControl("retry", "Retry", lambda cfg, t: t.status is Status.BLOCKED, _retry))
register(TaskControl("stop", "Stop", lambda cfg, t: t.status is Status.RUNNING, _stop))
register(TaskControl("approve", "Approve", _waits, _approve))
register(TaskControl("deny", "Deny", _waits, _deny))


def act_on_task(
    cfg: Config, board: Board, task_id: str, name: str, fields: Fields, by: str
) -> str:
    """Carry out the control ``name`` on the task; NotFound for a control that is not
    there, UsageError (the board's) for one that does not apply now."""
    control = TASK_CONTROLS.get(name)
    if control is None:
        raise NotFound(f"no control {name!r}; there are: {', '.join(sorted(TASK_CONTROLS))}")
    return control.act(cfg, board, board.get_task(task_id), fields, by)


def pause_board(board: Board, reason: str, by: str) -> str:
    found = board.pause(reason or "paused from the web console", by)
    return f"board {board.slug} paused: {found.reason}"


def resume_board(board: Board) -> str:
    return f"board {board.slug} {'resumed' if board.resume() else 'was not paused'}"


def pause_runner(home: Home, reason: str, by: str) -> str:
    home.ensure()
    found = pause.pause(home.pause_file, reason or "paused from the web console", by)
    return f"runner paused: {found.reason}"


def resume_runner(home: Home) -> str:
    return f"runner {'resumed' if pause.resume(home.pause_file) else 'was not paused'}"
