"""What follows a result the board took: the push (``push = "on_done"``) and the
``after_done`` hook, each reported on the board as a comment.

Neither can undo the result: the task is done whatever they say. The executor runs
them right after its result lands; a result the board took later (a recovery's
replay, a runner that died between) gets them from the cleanup pass
(``run/cleanup.py``), which finds the lane state's delivery still ``journaled``.

Each step (the push, the hook, each comment) runs once per accepted result: its
beginning is saved in the lane state (``delivery.steps``) before it runs, its end
after, so a runner killed after a step's end never runs it again (docs/delivery.md).
A step killed between its beginning and its end cannot be promised once (its effect
may or may not have happened): it runs again, with the same ``LANE_DELIVERY_ID`` in
its environment (the push's git and its hooks, every hook) so what it drives can tell
a repeat. A comment carries that key in a last ``Lane-Delivery:`` line, and one cut
short is written again only when the board does not have it: the board gets each
comment once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import Task
from lane_runner.config import Config
from lane_runner.providers.environment import passed
from lane_runner.run import hooks, lanestate, push, taskgit
from lane_runner.run.slices import FollowUps
from lane_runner.service import approvals

log = logging.getLogger(__name__)
#: What a denied task's follow-ups say instead of running.
WITHHELD = "denied: the push and the after_done hook are withheld for this result"
#: The last line of a follow-up's comment: the delivery id and the step it reports.
KEY_LINE = "Lane-Delivery: {key} {step}"


@dataclass(frozen=True)
class Notes:
    """The task's comments on the board: ``write`` one, and read the bodies ``written`` so
    far. Both raise BoardUnavailable while the board is away."""

    write: Callable[[str], None]
    written: Callable[[], list[str]]


class Steps:
    """The follow-up steps' journal in the lane state, saved at each beginning and end."""

    def __init__(self, state: lanestate.LaneState, save: Callable[[], None]) -> None:
        self.state, self.save = state, save
        self.key = state.delivery_id()

    def once(self, name: str, action: Callable[[bool], str | None],
             cancel: threading.Event) -> str | None:
        """Run ``action(again)`` unless step ``name`` ended before; what it said (now or
        then). ``again``: it began before and never ended. A step the runner's stop cut
        short is left unended, to run again."""
        earlier = self.state.step(name)
        if earlier is not None and earlier.ended:
            return earlier.said
        self.state.begin_step(name)
        self.save()
        said = action(earlier is not None)
        if not cancel.is_set():
            self.state.end_step(name, said)
            self.save()
        return said

    def comment(self, name: str, text: str, notes: Notes, cancel: threading.Event) -> None:
        """``text`` on the board once, with the key line that makes a repeat recognisable."""
        line = KEY_LINE.format(key=self.key, step=name)

        def write(again: bool) -> None:
            if again and any(body.rstrip().endswith(line) for body in notes.written()):
                log.info("comment %s of %s is on the board already", name, self.key)
                return
            notes.write(f"{text}\n\n{line}")

        self.once(f"comment {name}", write, cancel)


def follow_up(
    cfg: Config,
    facts: hooks.Facts,
    delivered: dict[str, Any] | None,
    notes: Notes,
    cancel: threading.Event,
    steps: Steps,
    current: Callable[[], Task],
) -> bool:
    """Push the result's commit to the task's branch (when configured and there is one),
    then run ``after_done``; whether all of it ended (then the delivery is ``followed``).

    A task whose approval is ``before_push`` (``current``: the task as the board has it
    now) waits for a person's word first: until then nothing runs and this says False
    (the cleanup sweep asks again); denied, neither ever runs, and a comment says so
    (docs/approvals.md).

    ``delivered`` is the result's ``delivery`` metadata (``run/delivery.py``); None when
    the result is not on a branch of ours (a hosted board's workspace). A disk that would
    not keep the steps' journal, or a board away for a comment, stops them where they
    are: the cleanup sweep runs the rest later, each step that ended not again.
    """
    try:
        gate = approvals.push_gate(cfg, current())
        if gate is approvals.PushGate.WAIT:
            log.info("follow-ups of %s/%s wait for approval", facts.board, facts.task_id)
            return False
        if gate is approvals.PushGate.WITHHELD:
            steps.comment("withheld", WITHHELD, notes, cancel)
        else:
            _follow_up(FollowUps.of(cfg), facts, delivered, notes, cancel, steps)
    except (OSError, BoardUnavailable) as error:
        log.warning("follow-ups of %s/%s left for the cleanup sweep: %s",
                    facts.board, facts.task_id, error)
        return False
    if cancel.is_set():
        return False
    steps.state.followed()
    steps.save()
    return True


def _follow_up(
    settings: FollowUps,
    facts: hooks.Facts,
    delivered: dict[str, Any] | None,
    notes: Notes,
    cancel: threading.Event,
    steps: Steps,
) -> None:
    head = delivered["head"] if delivered is not None else None
    worker = settings.worker
    if delivered is not None and head and settings.push == "on_done":
        branch = delivered["branch"]

        def pushed(again: bool) -> str:
            went = push.push(
                taskgit.branches_of(facts.worktree), settings.push_remote, branch, head,
                owner=worker.user,
                env={**passed(worker.env), "LANE_DELIVERY_ID": steps.key},
                wait=cancel.wait,
            )
            return went.describe(settings.push_remote, branch, head)

        said = steps.once("push", pushed, cancel)
        if said is not None and not cancel.is_set():
            steps.comment("push", said, notes, cancel)
    if cancel.is_set() or not facts.worktree.is_dir():
        return

    def after_done(again: bool) -> str | None:
        ran = hooks.run(worker.hooks, "after_done", facts, owner=worker.user,
                        passes=worker.env, egress=worker.egress)
        return ran.describe() if ran is not None and not ran.ok else None

    said = steps.once("after_done", after_done, cancel)
    if said is not None and not cancel.is_set():
        steps.comment("after_done", said, notes, cancel)


def facts_of(
    task_board: str,
    task_id: str,
    title: str,
    worktree: Path,
    run_id: int,
    summary: str,
    delivered: dict[str, Any] | None,
    delivery_id: str,
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
        delivery_id=delivery_id,
    )
