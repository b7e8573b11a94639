"""A hosted board's review column served for our lanes (issue 42, docs/hermes.md).

A task whose result went to ``review`` (Hermes's column) waits for a reviewer. This
claims one as the host claims it (``ReviewColumn.claim_review``: a run of its own),
hands it to a ``Reviewer``, and carries out the verdict: approved, the task is done;
changes requested, it goes back to its implementer with the findings, as Hermes's own
reviewer does. What reviews is not decided here: a ``Reviewer`` is any function from the
claimed review to a verdict (the verify-and-review issue's review run is meant to be
one), so the column is served the same way whoever reviews.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from lane_runner.board.base import ReviewColumn
from lane_runner.board.model import Claim, CompleteOutcome, ReviewVerdict, Run, Task
from lane_runner.errors import LaneRunnerError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReviewRequest:
    """What a reviewer is given: the task in review (its ``result`` is the implementer's
    accepted result) and the review run it works under."""

    task: Task
    run: Run


class ReviewFailed(LaneRunnerError):
    """The reviewer gave no verdict (its CLI failed, it was stopped): the task waits in
    review again, never taken for approved or rejected."""


#: A reviewer: the claimed review to a verdict, or ``ReviewFailed``.
Reviewer = Callable[[ReviewRequest], ReviewVerdict]


@dataclass(frozen=True)
class Reviewed:
    """One review served: the task, its verdict (None when it was handed back) and what
    the board made of it."""

    task_id: str
    run_id: int
    verdict: ReviewVerdict | None
    outcome: CompleteOutcome | None


def serve_one(
    board: ReviewColumn, node: str, lease_ttl: float, reviewer: Reviewer
) -> Reviewed | None:
    """Claim one review of this runner's lanes, review it, carry the verdict out; None
    when no review waits."""
    claim = board.claim_review(node, lease_ttl)
    return None if claim is None else serve(board, claim, reviewer)


def serve(board: ReviewColumn, claim: Claim, reviewer: Reviewer) -> Reviewed:
    """A claimed review reviewed and its verdict carried out (the daemon claims in its
    loop and serves in a worker slot)."""
    task, run = claim.task, claim.run
    try:
        verdict = reviewer(ReviewRequest(task, run))
    except ReviewFailed as error:
        log.warning("task %s: review run %s gave no verdict: %s", task.id, run.id, error)
        board.hand_back_review(run.id, f"the review gave no verdict: {error}")
        return Reviewed(task.id, run.id, None, None)
    outcome = board.end_review(run.id, verdict.approved, verdict.summary, list(verdict.findings))
    if outcome is CompleteOutcome.STALE:
        log.warning("task %s: review run %s was no longer current; verdict not applied",
                    task.id, run.id)
    return Reviewed(task.id, run.id, verdict, outcome)
