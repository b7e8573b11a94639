"""Finalize one pending record: the commit protocol of DESIGN §4.1.

pending (pinned) → prepared evidence → board commit (the callback) →
committed record, or conflict record → drop prepared → retire the pinned
pending inode.

Nothing here removes the pending record before the board's answer is recorded
durably in a committed or conflict record, so a crash at any point leaves
something recovery replays; the board's exact-run guard makes the replay
idempotent (§4 promises 1 and 2). An I/O error before the board commit leaves
everything pending; after it, the board's answer stands and recovery finishes
the bookkeeping.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable

from journal import atomic, names
from journal.lanes import BoardDir
from journal.pin import Pinned, pin
from journal.record import Invalid, RunIdentity, State, TerminalRecord, judge
from journal.retire import retire

log = logging.getLogger(__name__)

STALE_REASON = "the board no longer accepts a result for this run"
DIFFERENT_COMMITTED_REASON = "the committed record already holds a different result"


class CommitResult(enum.StrEnum):
    """The board's answer to one exact-run commit."""

    COMMITTED = "committed"
    STALE = "stale"
    PENDING = "pending"


class FinalizeOutcome(enum.StrEnum):
    COMMITTED = "committed"
    CONFLICT = "conflict"
    PENDING = "pending"
    ABSENT = "absent"
    #: The pending record cannot be trusted; recovery quarantines it.
    INVALID = "invalid"


CommitFn = Callable[[TerminalRecord], CommitResult]


class EvidenceConflict(Exception):
    """An evidence name already holds something other than the record being written."""


def ensure_record(bd: BoardDir, name: str, record: TerminalRecord) -> os.stat_result:
    """Durably create ``name`` holding ``record`` (no-replace), or accept an identical one.

    Identical means a valid record of the same identity, state and digest; anything
    else under that name raises EvidenceConflict. Returns the inode holding it.
    """
    created = atomic.write_new(bd.fs, bd.fd, name, record.to_bytes())
    if created is not None:
        return created
    existing = pin(bd.fs, bd.fd, name)
    if existing is None:
        raise EvidenceConflict(f"{name} vanished while being compared")
    with existing:
        if existing.payload is None:
            raise EvidenceConflict(f"{name} exists and is untrusted ({existing.problem})")
        try:
            found = judge(existing.payload, record.identity, record.state)
        except Invalid as error:
            raise EvidenceConflict(f"{name} exists and is invalid ({error.reason})") from error
        if found.digest != record.digest:
            raise EvidenceConflict(f"{name} holds a different result")
        return existing.stat


def call_board(commit: CommitFn, record: TerminalRecord) -> CommitResult:
    """The board's answer; a raising callback counts as ``pending`` (retried later)."""
    try:
        return CommitResult(commit(record))
    except Exception:
        log.exception(
            "board commit failed for %s/%s run %s; left pending for replay",
            record.board,
            record.task_id,
            record.run_id,
        )
        return CommitResult.PENDING


def settle(bd: BoardDir, record: TerminalRecord, answer: CommitResult) -> FinalizeOutcome:
    """Record the board's committed/stale answer durably as a committed or conflict record."""
    if answer is CommitResult.STALE:
        ensure_record(
            bd,
            names.conflict(record.task_id, record.run_id, record.digest),
            record.as_conflict(STALE_REASON),
        )
        return FinalizeOutcome.CONFLICT
    try:
        ensure_record(bd, names.committed(record.task_id, record.run_id), record.as_committed())
    except EvidenceConflict as error:
        log.warning(
            "keeping %s/%s run %s as a conflict record: %s",
            record.board,
            record.task_id,
            record.run_id,
            error,
        )
        ensure_record(
            bd,
            names.conflict(record.task_id, record.run_id, record.digest),
            record.as_conflict(DIFFERENT_COMMITTED_REASON),
        )
    return FinalizeOutcome.COMMITTED


def finalize_pinned(
    bd: BoardDir, pending: Pinned, record: TerminalRecord, commit: CommitFn
) -> FinalizeOutcome:
    """Steps 3-5 of §4.1 for a pending record already pinned and judged valid."""
    prepared_name = names.prepared(record.task_id, record.run_id, record.digest)
    try:
        prepared = ensure_record(bd, prepared_name, record.as_prepared())
    except (OSError, EvidenceConflict) as error:
        log.warning("could not prepare %s; left pending for replay: %s", prepared_name, error)
        return FinalizeOutcome.PENDING
    answer = call_board(commit, record)
    if answer is CommitResult.PENDING:
        return FinalizeOutcome.PENDING
    outcome = (
        FinalizeOutcome.COMMITTED if answer is CommitResult.COMMITTED else FinalizeOutcome.CONFLICT
    )
    try:
        outcome = settle(bd, record, answer)
        # Once the board's answer is durable here (committed or conflict record), a
        # pending or prepared entry that came back after a power loss only replays
        # into the same answer: the removals need no fsync of their own.
        retire(bd.fs, bd.fd, prepared_name, prepared, durable=False)
        retire(bd.fs, bd.fd, pending.name, pending.stat, durable=False)
    except (OSError, EvidenceConflict) as error:
        # The board has answered; the pending record (or prepared evidence) is still on
        # disk, so recovery replays it and the exact-run guard answers the same again.
        log.warning(
            "board answered %s for %s but journal bookkeeping is deferred: %s",
            answer,
            pending.name,
            error,
        )
    return outcome


def finalize(bd: BoardDir, task_id: str, run_id: int, commit: CommitFn) -> FinalizeOutcome:
    """Pin, judge and finalize ``<task>.run-<R>.terminal.pending.json``."""
    name = names.pending(task_id, run_id)
    try:
        pinned = pin(bd.fs, bd.fd, name)
    except OSError as error:
        log.warning("could not read %s; left pending: %s", name, error)
        return FinalizeOutcome.PENDING
    if pinned is None:
        return FinalizeOutcome.ABSENT
    with pinned:
        if pinned.payload is None:
            return FinalizeOutcome.INVALID
        try:
            record = judge(pinned.payload, RunIdentity(bd.board, task_id, run_id), State.PENDING)
        except Invalid:
            return FinalizeOutcome.INVALID
        return finalize_pinned(bd, pinned, record, commit)
