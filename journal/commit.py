"""Finalize pending records: the commit protocol of docs/ARCHITECTURE.md §4.1.

pending (pinned) → prepared evidence → board commit (the callback) →
committed record, or conflict record → drop prepared → retire the pinned
pending inode. Recovery finalizes many records at once, so each durable step
is taken for a whole batch with one directory fsync (a batch of one is the
daemon's case).

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from journal import atomic, names
from journal.lanes import BoardDir
from journal.pin import Pinned, pin
from journal.record import Invalid, RunIdentity, State, TerminalRecord, judge
from journal.retire import retire

log = logging.getLogger(__name__)

STALE_REASON = "the board no longer accepts a result for this run"
DIFFERENT_COMMITTED_REASON = "the committed record already holds a different result"
#: Seconds waited, one per look, for evidence another writer is placing by ``link`` +
#: ``unlink`` to settle to one link (``_pin_settled``): about 0.3 s in all.
SETTLE_PAUSES = (0.01, 0.02, 0.05, 0.1, 0.1)


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


@dataclass(frozen=True)
class Judged:
    """A pending record pinned (held open by the caller) and judged valid."""

    pending: Pinned
    record: TerminalRecord


def ensure_record(
    bd: BoardDir, name: str, record: TerminalRecord, *, durable: bool = True
) -> os.stat_result:
    """Create ``name`` holding ``record`` (no-replace), or accept an identical one.

    Identical means a valid record of the same identity, state and digest; anything
    else under that name raises EvidenceConflict. Returns the inode holding it. With
    ``durable`` False the new name waits for the caller's directory fsync.
    """
    created = atomic.write_new(bd.fs, bd.fd, name, record.to_bytes(), durable=durable)
    if created is not None:
        return created
    existing = _pin_settled(bd, name)
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


def _pin_settled(bd: BoardDir, name: str) -> Pinned | None:
    """``name`` pinned once no other writer is half-way through placing it.

    Where rename-no-replace is ``link`` + ``unlink`` (``fs.py``'s portable path), another
    finalizer placing the same evidence leaves it with two links for a moment, which
    ``pin`` rightly distrusts. A link count that stays above one through
    ``SETTLE_PAUSES`` is a real one (planted, or left by a crash) and stays untrusted."""
    existing = pin(bd.fs, bd.fd, name)
    for pause in SETTLE_PAUSES:
        if existing is None or existing.problem != "hardlinked":
            break
        existing.close()
        time.sleep(pause)
        existing = pin(bd.fs, bd.fd, name)
    return existing


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


def settle(
    bd: BoardDir, record: TerminalRecord, answer: CommitResult, *, durable: bool = True
) -> FinalizeOutcome:
    """Record the board's committed/stale answer as a committed or conflict record."""
    if answer is CommitResult.STALE:
        ensure_record(
            bd,
            names.conflict(record.task_id, record.run_id, record.digest),
            record.as_conflict(STALE_REASON),
            durable=durable,
        )
        return FinalizeOutcome.CONFLICT
    try:
        ensure_record(
            bd,
            names.committed(record.task_id, record.run_id),
            record.as_committed(),
            durable=durable,
        )
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
            durable=durable,
        )
    return FinalizeOutcome.COMMITTED


def finalize_batch(
    bd: BoardDir, batch: Sequence[Judged], commit: CommitFn
) -> list[FinalizeOutcome]:
    """Steps 3-5 of §4.1 for pending records already pinned and judged valid.

    Every prepared evidence is durable before the board is asked about any of them,
    and every committed or conflict record before any entry that could replay it is
    retired: the order of one record at a time, with one directory fsync per step.
    """
    outcomes = [FinalizeOutcome.PENDING] * len(batch)
    prepared = _prepare(bd, batch)
    if not prepared or not _sync(bd, "prepared evidence; left pending for replay"):
        return outcomes
    settled: list[int] = []
    for index in prepared:
        record = batch[index].record
        answer = call_board(commit, record)
        if answer is CommitResult.PENDING:
            continue
        committed = answer is CommitResult.COMMITTED
        outcomes[index] = FinalizeOutcome.COMMITTED if committed else FinalizeOutcome.CONFLICT
        try:
            outcomes[index] = settle(bd, record, answer, durable=False)
        except (OSError, EvidenceConflict) as error:
            # The board has answered; the pending record (or prepared evidence) is still
            # on disk, so recovery replays it and the exact-run guard answers the same.
            log.warning(
                "board answered %s for %s but journal bookkeeping is deferred: %s",
                answer,
                batch[index].pending.name,
                error,
            )
            continue
        settled.append(index)
    if settled and _sync(bd, "the board's answers; bookkeeping deferred to recovery"):
        for index in settled:
            _retire_replayables(bd, batch[index], prepared[index])
    return outcomes


def _prepare(bd: BoardDir, batch: Sequence[Judged]) -> dict[int, os.stat_result]:
    """The prepared evidence of each record that could be written, by batch index."""
    placed = {}
    for index, judged in enumerate(batch):
        record = judged.record
        name = names.prepared(record.task_id, record.run_id, record.digest)
        try:
            placed[index] = ensure_record(bd, name, record.as_prepared(), durable=False)
        except (OSError, EvidenceConflict) as error:
            log.warning("could not prepare %s; left pending for replay: %s", name, error)
    return placed


def _sync(bd: BoardDir, what: str) -> bool:
    try:
        bd.fs.fsync(bd.fd)
    except OSError as error:
        log.warning("could not make durable %s: %s", what, error)
        return False
    return True


def _retire_replayables(bd: BoardDir, judged: Judged, prepared: os.stat_result) -> None:
    """Drop the prepared evidence and the pending inode, now that the answer is durable.

    Their removals need no fsync of their own: either entry coming back after a power
    loss only replays into the board's same answer.
    """
    record = judged.record
    try:
        retire(
            bd.fs,
            bd.fd,
            names.prepared(record.task_id, record.run_id, record.digest),
            prepared,
            durable=False,
        )
        retire(bd.fs, bd.fd, judged.pending.name, judged.pending.stat, durable=False)
    except OSError as error:
        log.warning("could not retire %s; recovery finishes it: %s", judged.pending.name, error)


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
        return finalize_batch(bd, [Judged(pinned, record)], commit)[0]
