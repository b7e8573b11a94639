"""Recovery: replay whatever a crash left between journal states (docs/ARCHITECTURE.md §4.2).

Per board, in this order -- each step may create what the next one consumes:

0. abandoned temp files of dead writers are removed (a crash inside the
   link + unlink fallback leaves a temp name hardlinked to a record);
1. ``.retire.*`` staging holding a valid pending record bound to its canonical
   name is promoted to prepared evidence and the staging entry retired;
   anything else there is quarantined;
2. prepared evidence, oldest first, is committed to the board and settled;
3. pending records are judged (untrusted ones quarantined and their exact run
   made retryable) and finalized in batches of ``PENDING_BATCH``, one directory
   fsync per durable step per batch (commit.finalize_batch);
4. committed and conflict records and names that only resemble journal files
   are judged, and untrusted ones quarantined.

Lane state, candidates and provider results are not judged here (retention
bounds them). Recovery never raises for a bad entry: an I/O error defers that
entry to the next pass and is reported; everything else goes on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from journal import atomic, names
from journal.commit import (
    CommitFn,
    CommitResult,
    EvidenceConflict,
    Judged,
    call_board,
    ensure_record,
    finalize_batch,
    settle,
)
from journal.fs import FS
from journal.lanes import BoardDir, boards, mtime_order, open_board
from journal.pin import Pinned, pin, same_inode
from journal.quarantine import quarantine
from journal.record import Invalid, RunIdentity, State, TerminalRecord, decode, judge
from journal.retire import Retirement, retire

log = logging.getLogger(__name__)

RetryFn = Callable[[str, str, int, str], None]
_T = TypeVar("_T")
#: How often one pending name is re-judged when writers keep replacing it.
_REPLACEMENT_ROUNDS = 4
#: Pending records finalized together (each held open by a descriptor meanwhile).
PENDING_BATCH = 64


@dataclass(frozen=True)
class RecoveryEvent:
    """One thing recovery did (or could not do) to one entry."""

    board: str
    name: str
    action: str
    task_id: str | None = None
    run_id: int | None = None
    reason: str | None = None


@dataclass
class RecoveryReport:
    events: list[RecoveryEvent] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def of(self, action: str) -> list[RecoveryEvent]:
        return [event for event in self.events if event.action == action]

    def as_json(self) -> dict[str, Any]:
        return {"events": [asdict(event) for event in self.events], "skipped": self.skipped}


@dataclass
class _Pass:
    """One board's recovery: the open directory, the callbacks and the report."""

    bd: BoardDir
    commit: CommitFn
    make_retryable: RetryFn
    report: RecoveryReport

    def note(
        self, name: str, action: str, identity: RunIdentity | None = None, reason: str | None = None
    ) -> None:
        self.report.events.append(
            RecoveryEvent(
                self.bd.board,
                names.printable(name),
                action,
                identity.task_id if identity else None,
                identity.run_id if identity else None,
                reason,
            )
        )

    def listing(self, kinds: Iterable[names.Kind]) -> list[names.EntryName]:
        wanted = set(kinds)
        parsed = (names.parse(name) for name in self.bd.fs.listdir(self.bd.fd))
        return [entry for entry in parsed if entry.kind in wanted]

    def identity(self, entry: names.EntryName) -> RunIdentity | None:
        if entry.task_id is None or entry.run_id is None:
            return None
        return RunIdentity(self.bd.board, entry.task_id, entry.run_id)

    def quarantine(
        self, pinned: Pinned, reason: str, identity: RunIdentity | None
    ) -> Retirement | None:
        outcome = quarantine(self.bd.fs, self.bd.fd, self.bd.board, pinned, reason, identity)
        self.note(pinned.name, "quarantined", identity, reason)
        return outcome.retirement

    def retryable(self, identity: RunIdentity, reason: str) -> None:
        try:
            self.make_retryable(identity.board, identity.task_id, identity.run_id, reason)
        except Exception:
            log.exception(
                "could not make %s/%s run %s retryable; the next recovery tries again",
                identity.board,
                identity.task_id,
                identity.run_id,
            )


def recover(fs: FS, lanes_root: Path, commit: CommitFn, make_retryable: RetryFn) -> RecoveryReport:
    """Recover every board under ``lanes_root``; never raises for bad entries."""
    report = RecoveryReport()
    try:
        found, skipped = boards(fs, lanes_root)
    except OSError as error:
        log.warning("recovery deferred: cannot list %s: %s", lanes_root, error)
        report.events.append(RecoveryEvent("", "", "deferred", reason=str(error)))
        return report
    report.skipped.extend(names.printable(name) for name in skipped)
    for board in found:
        try:
            with open_board(fs, lanes_root, board, create=False) as bd:
                _recover_board(_Pass(bd, commit, make_retryable, report))
        except OSError as error:
            log.warning("recovery of board %s deferred: %s", board, error)
            report.events.append(RecoveryEvent(board, "", "deferred", reason=str(error)))
    return report


def _recover_board(p: _Pass) -> None:
    # Settled records are listed before the pass writes any: the ones it writes itself
    # need no second reading (re-validating them was a third of recovery's time).
    settled = p.listing({names.Kind.COMMITTED, names.Kind.CONFLICT, names.Kind.MALFORMED})
    _each(p, p.listing({names.Kind.TEMP}), _sweep_temp)
    _each(p, p.listing({names.Kind.STAGING}), _recover_staging)
    prepared = [entry.name for entry in p.listing({names.Kind.PREPARED})]
    ordered = mtime_order(p.bd.fs, p.bd.fd, prepared)
    _each(p, [names.parse(name) for name in ordered], _recover_prepared)
    _recover_pending(p, p.listing({names.Kind.PENDING}))
    _each(p, settled, _check_settled)


def _each(
    p: _Pass, entries: list[names.EntryName], step: Callable[[_Pass, names.EntryName], None]
) -> None:
    for entry in entries:
        _deferring(p, entry, step)


def _deferring(
    p: _Pass, entry: names.EntryName, step: Callable[[_Pass, names.EntryName], _T]
) -> _T | None:
    """``step``'s result; an I/O error defers this entry to the next pass."""
    try:
        return step(p, entry)
    except (OSError, EvidenceConflict) as error:
        log.warning("recovery of %s/%s deferred: %s", p.bd.board, entry.name, error)
        p.note(entry.name, "deferred", p.identity(entry), str(error))
        return None


def _sweep_temp(p: _Pass, entry: names.EntryName) -> None:
    if not atomic.is_abandoned(entry):
        return
    seen = p.bd.fs.lstat(p.bd.fd, entry.name)
    if retire(p.bd.fs, p.bd.fd, entry.name, seen) is Retirement.RETIRED:
        p.note(entry.name, "removed-temp")


def _recover_staging(p: _Pass, entry: names.EntryName) -> None:
    pinned = pin(p.bd.fs, p.bd.fd, entry.name)
    if pinned is None:
        return
    with pinned:
        if pinned.problem == "hardlinked" and _drop_interrupted_link(p, entry, pinned):
            return
        record = (
            None if pinned.payload is None else staged_record(p.bd.board, entry, pinned.payload)
        )
        if record is None:
            p.quarantine(pinned, "untrusted-staging", None)
            return
        origin = _canonical(record)
        if carries_result(record):
            prepared = record if record.state is State.PREPARED else record.as_prepared()
            ensure_record(p.bd, _canonical(prepared), prepared)
            p.note(entry.name, "promoted", record.identity)
        else:
            p.note(entry.name, "finished-retirement", record.identity)
        retire(p.bd.fs, p.bd.fd, entry.name, pinned.stat, origin=origin)


def _canonical(record: TerminalRecord) -> str:
    return names.of_record(str(record.state), record.task_id, record.run_id, record.digest)


def staged_record(board: str, entry: names.EntryName, payload: bytes) -> TerminalRecord | None:
    """The staged record if it is a valid record of ``board`` bound (by ``<p>``) to the
    canonical name of its own state: an entry whose retirement our crash interrupted."""
    try:
        record = decode(payload)
    except Invalid:
        return None
    if record.board != board or names.origin_of(_canonical(record)) != entry.origin:
        return None
    return record


def carries_result(record: TerminalRecord) -> bool:
    """Pending and prepared records hold an accepted result the board may not have yet."""
    return record.state in (State.PENDING, State.PREPARED)


def _drop_interrupted_link(p: _Pass, entry: names.EntryName, pinned: Pinned) -> bool:
    """A crash inside link + unlink left the staging name hardlinked to its origin.

    The origin name still holds the inode, so only the extra staging link goes.
    """
    for name in p.bd.fs.listdir(p.bd.fd):
        if name == entry.name or names.origin_of(name) != entry.origin:
            continue
        try:
            origin = p.bd.fs.lstat(p.bd.fd, name)
        except FileNotFoundError:
            continue
        if same_inode(origin, pinned.stat):
            retire(p.bd.fs, p.bd.fd, entry.name, pinned.stat, origin=name)
            p.note(entry.name, "dropped-interrupted-link")
            return True
    return False


def _recover_prepared(p: _Pass, entry: names.EntryName) -> None:
    identity = p.identity(entry)
    assert identity is not None
    pinned = pin(p.bd.fs, p.bd.fd, entry.name)
    if pinned is None:
        return
    with pinned:
        if pinned.payload is None:
            p.quarantine(pinned, pinned.problem or "untrusted", identity)
            return
        try:
            record = judge(pinned.payload, identity, State.PREPARED, entry.digest)
        except Invalid as error:
            p.quarantine(pinned, error.reason, identity)
            return
        answer = call_board(p.commit, record)
        if answer is CommitResult.PENDING:
            p.note(entry.name, "pending", identity, "the board asked to retry later")
            return
        outcome = settle(p.bd, record, answer)
        retire(p.bd.fs, p.bd.fd, entry.name, pinned.stat)
        p.note(entry.name, str(outcome), identity)


def _recover_pending(p: _Pass, entries: list[names.EntryName]) -> None:
    for start in range(0, len(entries), PENDING_BATCH):
        with contextlib.ExitStack() as held:
            batch: list[Judged] = []
            for entry in entries[start : start + PENDING_BATCH]:
                judged = _deferring(p, entry, _judge_pending)
                if judged is not None:
                    held.enter_context(judged.pending)
                    batch.append(judged)
            for judged, outcome in zip(batch, finalize_batch(p.bd, batch, p.commit), strict=True):
                p.note(judged.pending.name, str(outcome), judged.record.identity)


def _judge_pending(p: _Pass, entry: names.EntryName) -> Judged | None:
    """The pending record pinned and valid (the caller closes it), or None once handled.

    An untrusted one is quarantined and its exact run made retryable; when a writer
    replaced the name meanwhile, the replacement is judged in turn.
    """
    identity = p.identity(entry)
    assert identity is not None
    for _ in range(_REPLACEMENT_ROUNDS):
        pinned = pin(p.bd.fs, p.bd.fd, entry.name)
        if pinned is None:
            return None
        record, reason = _verdict(pinned, identity)
        if record is not None:
            return Judged(pinned, record)
        with pinned:
            try:
                retirement = p.quarantine(pinned, reason, identity)
            except OSError as error:
                p.note(entry.name, "deferred", identity, f"quarantine failed: {error}")
                retirement = None
        # The run is made retryable even when quarantine had to be deferred: an
        # untrusted record must never hold its task hostage.
        p.retryable(identity, reason)
        if retirement not in (Retirement.REPLACED, Retirement.STRANDED):
            return None
    p.note(entry.name, "deferred", identity, "the pending name keeps being replaced")
    return None


def _verdict(pinned: Pinned, identity: RunIdentity) -> tuple[TerminalRecord | None, str]:
    """The pending record, or why it may not be trusted."""
    if pinned.payload is None:
        return None, pinned.problem or "untrusted"
    try:
        return judge(pinned.payload, identity, State.PENDING), ""
    except Invalid as error:
        return None, error.reason


def _check_settled(p: _Pass, entry: names.EntryName) -> None:
    pinned = pin(p.bd.fs, p.bd.fd, entry.name)
    if pinned is None:
        return
    identity = p.identity(entry)
    with pinned:
        if entry.kind is names.Kind.MALFORMED or identity is None:
            p.quarantine(pinned, "malformed-name", None)
            return
        if pinned.payload is None:
            p.quarantine(pinned, pinned.problem or "untrusted", identity)
            return
        try:
            judge(pinned.payload, identity, State(str(entry.kind)), entry.digest)
        except Invalid as error:
            p.quarantine(pinned, error.reason, identity)
