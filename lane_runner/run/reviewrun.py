"""The reviewer's run of its own (issue 41, docs/verification.md): on a board with review
runs (the SQL boards, ``ReviewRuns``) a completed answer's review is a run beside the
implementer's, with its own run id, node and lease, and the role ``review``.

Why a run of its own: the board then says who reviewed and when (``task show``, the
console), the reviewer's lease is its own (its heartbeats renew it while the run it
reviews is its task's), and the usage ledger records the reviewer's spend under the
review run's id as well as under the role. The task stays the implementer's run's: only
that run accepts, completes or ends the task, and ending it ends its review runs
(``SqlAccess._end_run``); a runner killed meanwhile ends its leftovers at its next start
(``service/recovery.py``). The review run's rooms are the executor's, built on a copy of
the implementer's ``Claimed`` with the review run in its place: the lane state, the
worktree and the cancel event are the same objects, so an operator's stop of the task
ends the reviewer too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from lane_runner.board.base import BoardUnavailable, ReviewRuns
from lane_runner.board.model import Outcome
from lane_runner.providers import Attempt, Classification
from lane_runner.run.attempt import Attempts
from lane_runner.run.claimed import Claimed
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.spending import Spending

log = logging.getLogger(__name__)


class NotTheTasks(Exception):
    """The implementer's run is no longer its task's: no review run was begun."""


@dataclass
class ReviewRun:
    """A begun review run and the rooms its reviewer's attempt goes through."""

    claimed: Claimed
    attempts: Attempts
    board: ReviewRuns

    @property
    def id(self) -> int:
        return self.claimed.run.id

    def end(self, outcome: Outcome, reason: str) -> None:
        """The review run ended; a board away leaves it to the end of the run it reviews
        or to this node's next recovery, which end it too."""
        try:
            self.board.end_review_run(self.id, outcome, reason[:2000])
        except BoardUnavailable as error:
            log.warning("review run %s not ended now (%s): its implementer's run's end or "
                        "the next recovery ends it", self.id, error)
        finally:
            c = self.claimed
            c.s.activity.reviewing(c.run.for_run or c.run.id, None)


def begin(c: Claimed) -> ReviewRun | None:
    """A review run of ``c``'s run begun on its board, or None on a board without review
    runs (a hosted board): there the review is an attempt of the implementer's run.
    NotTheTasks: the run is no longer its task's."""
    board = c.board
    if not isinstance(board, ReviewRuns):
        return None
    run = board.start_review_run(c.run.id, c.s.node, c.settings.heartbeats.lease_ttl)
    if run is None:
        raise NotTheTasks(f"run {c.run.id} is no longer its task's: no review run begun")
    reviewing = replace(c, run=run)
    notebook, spending = Notebook(reviewing), Spending(reviewing)
    lease = Lease(reviewing, notebook, spending)
    c.s.activity.reviewing(c.run.id, run.id)
    return ReviewRun(reviewing, Attempts(reviewing, notebook, spending, lease), board)


def ending(attempt: Attempt, verdict: str | None) -> tuple[Outcome, str]:
    """How a review run ends, from its attempt and the verdict it gave (pure)."""
    if verdict is not None:
        return Outcome.REVIEWED, verdict
    if attempt.classification is Classification.LEASE_LOST:
        return Outcome.EXPIRED, attempt.reason
    if attempt.classification is Classification.CANCELLED:
        return Outcome.RECLAIMED, attempt.reason
    return Outcome.FAILED, attempt.reason or "no verdict"
