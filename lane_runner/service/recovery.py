"""Recovery orchestration (docs/ARCHITECTURE.md §4.2): the journal's replay, then orphans
and expired leases.

``recover`` runs at every daemon start and as ``lane-runner recover``: it replays
what a crash left in the journal, then returns this node's orphaned runs to
``ready`` (outcome ``reclaimed``: a restart is not a failure; the provider
session is kept for resume). ``rescue_expired`` is the daemon's periodic look
at other nodes' runs whose leases ran out.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journal import RecoveryReport
from journal import names as journal_names
from lane_runner import files
from lane_runner.board.base import BoardUnavailable, ReviewColumn, ReviewRuns
from lane_runner.board.model import BlockKind, Outcome, Run
from lane_runner.run import undelivered
from lane_runner.service import leftovers, workerpool
from lane_runner.service.services import Services
from lane_runner.usage import share

log = logging.getLogger(__name__)

WAITING = ("pending", "deferred")  # journal recovery actions that leave a result uncommitted
RESTART_REASON = "the runner restarted; the run resumes its provider session"


@dataclass
class RunRef:
    board: str
    task_id: str
    run_id: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "reason": self.reason,
        }


@dataclass
class RecoveryResult:
    journal: RecoveryReport
    reclaimed: list[RunRef] = field(default_factory=list)
    rescued: list[RunRef] = field(default_factory=list)
    unavailable_boards: dict[str, str] = field(default_factory=dict)
    ended_processes: list[int] = field(default_factory=list)
    reconciled: list[RunRef] = field(default_factory=list)
    """Accepted results this home's lane state kept that the board has from another run."""
    usage_sent: int = 0
    """Usage records the home held that their board's shared ledger had not taken yet."""

    @property
    def pending_left(self) -> int:
        """Accepted results still waiting for their board (recover exits 3 while any do)."""
        return sum(event.action in WAITING for event in self.journal.events)


def recover(services: Services) -> RecoveryResult:
    """Run only while holding the home lock with no worker running (start, ``recover``)."""
    ended = leftovers.end(services.node, services.home.root)
    report = services.journal.recover(services.commit, services.make_retryable)
    result = RecoveryResult(journal=report, ended_processes=ended)
    for slug in services.store.board_slugs():
        _private_answers(services.home.lane_dir(slug))
        try:
            result.reclaimed += _reclaim_orphans(services, slug)
            _release_holds(services, slug)
            result.reconciled += _reconcile(services, slug)
            result.usage_sent += _send_usage(services, slug)
        except BoardUnavailable as error:
            result.unavailable_boards[slug] = str(error)
    return result


def _private_answers(lanes: Path) -> None:
    """The answer files CLIs wrote into ``lanes`` with their own umask, made private: a
    daemon killed between a CLI's answer and its ``chmod`` (``run/attempt.py``) left them
    readable to others (``doctor``'s private modes)."""
    try:
        found = [lanes / name for name in os.listdir(lanes)
                 if journal_names.parse(name).kind is journal_names.Kind.PROVIDER_RESULT]
    except FileNotFoundError:
        return  # no run of the board has written here yet
    except OSError as error:  # the journal's recovery has said why this folder is unusable
        log.warning("answer files in %s not made private: %s", lanes, error)
        return
    for path in found:
        try:
            files.make_private(path)
        except OSError as error:  # a mode is no reason to stop recovery
            log.warning("cannot make %s private: %s", path, error)


def _reconcile(services: Services, slug: str) -> list[RunRef]:
    """Clear the lane states that still hold a result the board got through another run
    (``run/undelivered.py``)."""
    board = services.store.board(slug)
    lanes = services.home.lane_dir(slug)
    return [
        RunRef(slug, done.task_id, done.accepted_run, done.describe())
        for done in undelivered.reconcile(board, services.journal, lanes, slug)
    ]


def _send_usage(services: Services, slug: str) -> int:
    """The home's usage records the board has not taken. A disk error (reading the home's
    ledger, writing its marks) does not stop recovery: what was not marked is sent again
    later, which the board ignores for what it took."""
    try:
        return share.send(services.store.board(slug), services.ledger)
    except OSError as error:
        log.warning("usage of board %s not shared now (%s): sent again later",
                    slug, error)
        return 0


def _reclaim_orphans(services: Services, slug: str) -> list[RunRef]:
    board = services.store.board(slug)
    _end_review_runs(board, services.node)
    reclaimed = []
    for run in board.running_runs(node=services.node):
        if _holds_result(services, run):
            continue
        worktree = services.home.worktree(slug, run.task_id)
        undelivered.commit_kept(
            board, services.home.lane_dir(slug), worktree, slug, run,
            services.cfg.commit_author, workerpool.owner_of(worktree, services.cfg),
        )
        if board.reclaim(run.id, RESTART_REASON, Outcome.RECLAIMED):
            reclaimed.append(RunRef(slug, run.task_id, run.id, RESTART_REASON))
    return reclaimed


def _end_review_runs(board: object, node: str) -> None:
    """This node's review runs left open (docs/verification.md) end first: the task's own
    run is reclaimed or delivered below as any other, and a review run is neither. The
    review is asked again from the lane state by the task's next run."""
    if not isinstance(board, ReviewRuns):
        return
    for run in board.end_leftover_review_runs(node):
        log.info("%s/%s: review run %s (of run %s) ended: its runner ended before it did",
                 run.board, run.task_id, run.id, run.for_run)


def _release_holds(services: Services, slug: str) -> None:
    """Results this node sent to a host's review column are no longer held: their
    follow-ups ended with the process that ran them (``ReviewColumn.release_hold``)."""
    board = services.store.board(slug)
    if isinstance(board, ReviewColumn):
        released = board.release_holds(services.node)
        if released:
            log.info("board %s: %d review hold(s) of the last run released", slug, released)


def _holds_result(services: Services, run: Run) -> bool:
    """A run whose accepted result is still in the journal stays claimed until it commits."""
    return services.holds_result(run.board, run.task_id, run.id)


def rescue_expired(
    services: Services, active: Collection[int], now: float | None = None
) -> list[RunRef]:
    """Return runs whose lease ran out to ``ready`` (outcome ``expired``, not a failure).

    A board that is unavailable is skipped, and rests (``service/resting.py``).
    """
    rescued: list[RunRef] = []
    for slug in services.store.board_slugs():
        try:
            with services.resting.use(slug):
                rescued += _rescue_on(services, slug, active, now)
        except BoardUnavailable as error:
            log.warning("board %s unavailable while rescuing expired leases: %s", slug, error)
    return rescued


def _rescue_on(
    services: Services, slug: str, active: Collection[int], now: float | None
) -> list[RunRef]:
    rescued = []
    board = services.store.board(slug)
    for run in board.expired_runs(now):
        if run.id in active or (run.node == services.node and _holds_result(services, run)):
            continue
        reason = f"lease of node {run.node} expired"
        if run.stop is not None and not run.stop.requeue:
            # An operator stopped it and its runner died before carrying that out.
            reason = f"stopped by an operator: {run.stop.reason} ({reason})"
            if board.block(run.id, reason, BlockKind.NEEDS_INPUT, count_failure=False):
                rescued.append(RunRef(slug, run.task_id, run.id, reason))
            continue
        if board.reclaim(run.id, reason, Outcome.EXPIRED):
            log.info("rescued %s/%s run %s: %s", slug, run.task_id, run.id, reason)
            rescued.append(RunRef(slug, run.task_id, run.id, reason))
    return rescued
