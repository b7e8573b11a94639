"""What follows a result the board took: the push (``push = "on_done"``) and the
``after_done`` hook, each reported on the board as a comment.

Neither can undo the result: the task is done whatever they say. The executor runs
them right after its result lands; a result the board took later (a recovery's
replay, a runner that died between) gets them from the cleanup pass
(``run/cleanup.py``), which finds the lane state's delivery still ``journaled``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lane_runner.config import Config
from lane_runner.providers.environment import passed
from lane_runner.run import hooks, push


def follow_up(
    cfg: Config,
    facts: hooks.Facts,
    delivered: dict[str, Any] | None,
    comment: Callable[[str], None],
    cancel: threading.Event,
) -> None:
    """Push the task's branch (when configured and there is one), then run ``after_done``.

    ``delivered`` is the result's ``delivery`` metadata (``run/delivery.py``); None when
    the result is not on a branch of ours (a hosted board's workspace).
    """
    if delivered is not None and cfg.push == "on_done":
        pushed = push.push(
            facts.worktree,
            cfg.push_remote,
            delivered["branch"],
            owner=cfg.worker_user,
            env=passed(cfg.worker_env),
            wait=cancel.wait,
        )
        comment(pushed.describe(cfg.push_remote, delivered["branch"], delivered["head"]))
    if not cancel.is_set() and facts.worktree.is_dir():
        ran = hooks.run(
            cfg.hooks, "after_done", facts, owner=cfg.worker_user, passes=cfg.worker_env
        )
        if ran is not None and not ran.ok:
            comment(ran.describe())


def facts_of(
    task_board: str,
    task_id: str,
    title: str,
    worktree: Path,
    run_id: int,
    summary: str,
    delivered: dict[str, Any] | None,
) -> hooks.Facts:
    """The hook facts of a done task, from its delivery metadata."""
    return hooks.Facts(
        board=task_board,
        task_id=task_id,
        title=title,
        branch=delivered["branch"] if delivered else "",
        worktree=worktree,
        run_id=run_id,
        commit=delivered["head"] if delivered else None,
        summary=summary,
    )
