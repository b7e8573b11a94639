"""A run the daemon hands back to its board as it reaps the run's thread (``daemon.py``):
one cut short by the shutdown under ``release_on_stop``, and one whose thread crashed.

Both go through the board's exact-run reclaim, so a run whose lease is no longer this
runner's is left alone; a board that is away leaves the run to its lease.
"""

from __future__ import annotations

import logging

from lane_runner import redact
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import Claim, Outcome
from lane_runner.run.executor import RunReport
from lane_runner.run.workspace import branch_name
from lane_runner.service.services import Services

log = logging.getLogger(__name__)


def handover(claim: Claim, node: str, report: RunReport) -> str:
    """The comment a run handed back at shutdown leaves for whoever takes the task next:
    the work so far is on the task's branch, the provider session stays with this node."""
    provider = f" ({report.provider})" if report.provider else ""
    return (
        f"handed back at shutdown by node {node} (release_on_stop): run {claim.run.id}"
        f"{provider} was cut short ({redact.shown(report.reason, 300)}); uncounted. Its work "
        f"so far is in its worktree on branch {branch_name(claim.task.board, claim.task.id)} "
        "of this node; the provider session is not carried over, so the next run starts anew."
    )


def release(services: Services, claim: Claim, report: RunReport) -> None:
    """``release_on_stop``: a run cut short by the shutdown goes back to ready, uncounted,
    with a comment handing it over, instead of staying claimed for a next start that a
    pod scaled down never has."""
    run = claim.run
    note = handover(claim, services.node, report)
    try:
        with services.resting.use(run.board):
            board = services.store.board(run.board)
            if board.reclaim(run.id, note, Outcome.RECLAIMED, count_failure=False):
                board.comment(run.task_id, note, "lane-runner")
                log.info("run %s of %s/%s handed back to ready", run.id, run.board, run.task_id)
    except BoardUnavailable as error:
        log.warning("run %s not handed back (%s); its lease will be", run.id, error)


def crashed(services: Services, claim: Claim, reason: str) -> bool:
    """A worker thread died: count a failure unless its result is safe in the journal.
    True when it is (a finalization pending: recovery commits it)."""
    run = claim.run
    if services.holds_result(run.board, run.task_id, run.id):
        return True
    try:
        with services.resting.use(run.board):
            services.store.board(run.board).reclaim(
                run.id,
                redact.shown(f"worker crashed: {reason}"),
                Outcome.FAILED,
                count_failure=True,
            )
    except BoardUnavailable as error:
        log.warning("cannot hand back crashed run %s now (%s); its lease will", run.id, error)
    return False
