"""The follow-ups a hosted board's accepted result still owes (issue 42, docs/hermes.md).

On our own boards the cleanup sweep finds a done task whose lane state never reached
``followed`` and runs the rest of its push and ``after_done`` (``run/cleanup.py``). A
hosted board (Hermes) needs a path of its own: its task may still wait in ``review``,
after a review its ``completed_run_id`` is the reviewer's run, and its workspace is the
host's, never removed here. So the result is matched by the run that delivered it (the
lane state's ``delivery.run``, a run the board shows ``completed``), and the follow-ups
run where that run worked: the host's worktree for a ``worktree`` task, this runner's
own worktree of the repository for a ``dir:`` one. Each step that ended is not run
again (``run/followup.py``): the same ``LANE_DELIVERY_ID``, each comment once.

Any board's next run of a task (``before_run``) starts from the task's lane state, which
would hold an earlier result's owed follow-ups no more: they run first, on every board.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from journal import Document
from journal import names as journal_names
from lane_runner.board.base import Board, BoardUnavailable
from lane_runner.board.model import Outcome, Status, Task
from lane_runner.errors import NotFound
from lane_runner.run import followup, lanestate
from lane_runner.run.stage import Stage
from lane_runner.service.services import Services

log = logging.getLogger(__name__)
AUTHOR = "lane-runner"
#: Where an accepted result of a hosted board may stand while its follow-ups are owed.
_TOOK_IT = (Status.REVIEW, Status.DONE, Status.ARCHIVED)


def follow_up_all(services: Services, board: Board) -> list[str]:
    """Run the owed follow-ups of every task of ``board`` the board took a result of;
    the tasks (``board/task``) whose follow-ups all ended now."""
    followed = []
    for status in _TOOK_IT:
        for task in board.list_tasks(status):
            if _follow_up(services, board, task):
                followed.append(f"{task.board}/{task.id}")
    return followed


def before_run(services: Services, board: Board, task: Task) -> bool:
    """Whether ``task`` owes no follow-ups of an earlier accepted result any more: owed
    ones run first. A run this runner claimed of the task starts from the task's lane
    state, which holds them no more after: a review of a result whose runner was killed
    among them (the hold released at the restart), or the implementer again when another
    reviewer sent that result back before this runner's sweep found it in review."""
    try:
        if _follow_up(services, board, task, claimed=True):
            log.info("follow-ups of %s/%s ended before its next run", task.board, task.id)
    except BoardUnavailable as error:
        log.warning("follow-ups of %s/%s not run before its next run: %s",
                    task.board, task.id, error)
    return owed(services, board, task, claimed=True) is None or worktree_of(services, task) is None


def owed(
    services: Services, board: Board, task: Task, *, claimed: bool = False
) -> lanestate.LaneState | None:
    """The task's lane state when its accepted result's follow-ups are owed and may run
    now: the board completed the run that delivered it, no thread of this runner still
    carries that run, and no run works in the task's workspace (a reviewer's; unless
    ``claimed``: the live run is this runner's claim of the task, not yet at work)."""
    state = lanestate.saved(services.home.lane_dir(board.slug), board.slug, task.id)
    accepted = state.delivery if state is not None else None
    if accepted is None or accepted.stage is Stage.FOLLOWED:
        return None
    if services.at_work(accepted.run) or (
        not claimed and _live(board, task.current_run_id)
    ):
        return None
    try:
        took = board.get_run(accepted.run).outcome is Outcome.COMPLETED
    except NotFound:
        return None
    return state if took else None


def worktree_of(services: Services, task: Task) -> Path | None:
    """Where the delivering run worked (``run/workplace.py``): this runner's own worktree
    of a ``dir:`` task's repository, else the host's workspace the task names (Hermes's
    worktree or scratch directory, a ``dir:`` outside git)."""
    own = services.home.worktree(task.board, task.id)
    if own.is_dir():
        return own
    _, _, path = (task.workspace or "").partition(":")
    return Path(path) if path else None


def _live(board: Board, run_id: int | None) -> bool:
    if run_id is None:
        return False
    try:
        return board.get_run(run_id).ended_at is None
    except NotFound:
        return False


class _Running:
    """The tasks whose owed follow-ups a thread of this process runs now. The sweep's
    thread and a reviewer's may find the same ones owed at once (a restart's first
    sweep beside its first review claim): one runs them, the other finds them ended
    (the reviewer waits for them; the sweep passes the task over)."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.locks: dict[tuple[str, str], threading.Lock] = {}

    def of(self, board: str, task_id: str) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault((board, task_id), threading.Lock())


_RUNNING = _Running()


def _follow_up(services: Services, board: Board, task: Task, *, claimed: bool = False) -> bool:
    lock = _RUNNING.of(task.board, task.id)
    if not lock.acquire(blocking=claimed):
        return False
    try:
        return _follow_up_now(services, board, task, claimed=claimed)
    finally:
        lock.release()


def _follow_up_now(services: Services, board: Board, task: Task, *, claimed: bool) -> bool:
    state = owed(services, board, task, claimed=claimed)
    worktree = worktree_of(services, task)
    if state is None or worktree is None:
        return False
    accepted = state.delivery
    assert accepted is not None
    if accepted.stage is Stage.ACCEPTED:
        # The board completed this very run, which only its pending record does: the
        # result was journaled, and the runner stopped before its lane state said so.
        state.journaled(dict(accepted.metadata))
    delivered: dict[str, Any] | None = accepted.metadata.get("delivery")

    def save() -> None:
        document = Document(journal_names.lane_state(task.id), state.to_document())
        services.journal.write_documents(task.board, [document])

    steps = followup.Steps(state, save)
    facts = followup.facts_of(
        task.board, task.id, task.title, worktree, accepted.run,
        str(accepted.result.get("summary", "")), delivered, steps.key,
    )
    def say(text: str) -> None:
        board.comment(task.id, text, author=AUTHOR)

    notes = followup.Notes(
        say,
        lambda: [comment.body for comment in board.comments(task.id)],
    )
    log.info("follow-ups of %s/%s (run %d) run again in %s", task.board, task.id,
             accepted.run, worktree)
    return followup.follow_up(
        services.cfg, facts, delivered, notes, services.cancel, steps,
        lambda: board.get_task(task.id),
    )
