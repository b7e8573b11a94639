"""``Journal``: the one object the daemon holds, over ``<home>/lanes``.

It opens the board directory for each call and hands the work to the module
that owns the concept (commit, recovery, retention, inspection, atomic).
Costs in fsyncs are documented in ``journal/__init__.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from journal import atomic, commit, inspect, names, recovery, retention
from journal.commit import CommitFn, EvidenceConflict, FinalizeOutcome
from journal.fs import FS, LinuxFS
from journal.lanes import BoardDir, open_board
from journal.pin import pin
from journal.record import (
    MAX_RECORD_BYTES,
    Invalid,
    RunIdentity,
    State,
    TerminalRecord,
    check_document,
    judge,
    terminal_problem,
)
from journal.recovery import RecoveryReport, RetryFn, carries_result, staged_record
from journal.retention import CollectReport, RetentionPolicy

log = logging.getLogger(__name__)

#: Lane files the daemon may write through ``write_documents``: never terminal records.
_DOCUMENT_KINDS = frozenset(
    {names.Kind.LANE_STATE, names.Kind.CANDIDATE, names.Kind.PROVIDER_RESULT}
)


class PendingConflict(FileExistsError):
    """A pending record for this run already exists and holds a different result."""


class Journal:
    def __init__(self, lanes_root: Path, fs: FS | None = None) -> None:
        self.lanes_root = Path(lanes_root)
        self.fs: FS = fs if fs is not None else LinuxFS()

    def write_pending(
        self,
        board: str,
        task_id: str,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        metadata: dict[str, Any],
    ) -> Path:
        """Durably record an accepted result (no-replace); an identical one there is fine."""
        record = TerminalRecord(board, task_id, run_id, result, summary, metadata)
        if (error := check_document(record.document())) is not None:
            raise ValueError(f"not a valid terminal record: {error}")
        if (problem := terminal_problem(result, summary)) is not None:
            raise ValueError(f"not a finished result: {problem}")
        if len(record.to_bytes()) > MAX_RECORD_BYTES:
            raise ValueError("terminal record exceeds 1 MiB")
        name = names.pending(task_id, run_id)
        with open_board(self.fs, self.lanes_root, board, create=True) as bd:
            try:
                commit.ensure_record(bd, name, record)
            except EvidenceConflict as error:
                raise PendingConflict(str(error)) from error
            return bd.path / name

    def finalize(
        self, board: str, task_id: str, run_id: int, commit_fn: CommitFn
    ) -> FinalizeOutcome:
        """Run the §4.1 commit protocol for one pending record."""
        try:
            with open_board(self.fs, self.lanes_root, board, create=False) as bd:
                return commit.finalize(bd, task_id, run_id, commit_fn)
        except FileNotFoundError:
            return FinalizeOutcome.ABSENT
        except OSError as error:
            log.warning(
                "could not open board %s; %s/run %s left pending: %s", board, task_id, run_id, error
            )
            return FinalizeOutcome.PENDING

    def recover(self, commit_fn: CommitFn, make_retryable: RetryFn) -> RecoveryReport:
        return recovery.recover(self.fs, self.lanes_root, commit_fn, make_retryable)

    def has_pending(self, board: str, task_id: str, run_id: int) -> bool:
        """Whether an accepted result for this exact run still awaits the board."""
        try:
            with open_board(self.fs, self.lanes_root, board, create=False) as bd:
                return _carries(bd, RunIdentity(board, task_id, run_id))
        except FileNotFoundError:
            return False

    def collect(
        self,
        now: float | None = None,
        policy: RetentionPolicy | None = None,
        settled: retention.Settled | None = None,
    ) -> CollectReport:
        """Bound each board's artifacts (``retention``); the lane states of the tasks
        ``settled`` names are artifacts too."""
        return retention.collect(
            self.fs,
            self.lanes_root,
            time.time() if now is None else now,
            policy or RetentionPolicy(),
            settled,
        )

    def entries(self, board: str | None = None) -> list[inspect.Entry]:
        return inspect.entries(self.fs, self.lanes_root, board)

    def write_documents(self, board: str, documents: Sequence[Document]) -> list[Path]:
        """Write non-terminal lane files (lane state, candidates) in order, for one
        directory fsync: each is atomic, and durable once this returns.

        Each file's data is fsynced before its rename; the one directory fsync at the
        end covers every rename made, also when a later one fails (a ``new`` name
        that exists raises ``FileExistsError`` after the earlier ones are durable).
        """
        with open_board(self.fs, self.lanes_root, board, create=True) as bd:
            try:
                for document in documents:
                    _place(bd, document)
            finally:
                self.fs.fsync(bd.fd)
            return [bd.path / document.name for document in documents]

    def noreplace_method(self, board: str) -> str:
        """``renameat2`` or ``link+unlink``: what rename-no-replace gets for this board."""
        with open_board(self.fs, self.lanes_root, board, create=True) as bd:
            return self.fs.noreplace_method(bd.fd)


@dataclass(frozen=True)
class Document:
    """A non-terminal lane file to write: replaced, or created only if absent (``new``)."""

    name: str
    document: dict[str, Any]
    new: bool = False


def _place(bd: BoardDir, document: Document) -> None:
    """Rename one lane file into place; its directory entry is not durable yet."""
    name, data = _document_name(document.name), _document_bytes(document.document)
    if not document.new:
        atomic.write_replace(bd.fs, bd.fd, name, data, durable=False)
    elif atomic.write_new(bd.fs, bd.fd, name, data, durable=False) is None:
        raise FileExistsError(bd.path / name)


def _document_name(name: str) -> str:
    if names.parse(name).kind not in _DOCUMENT_KINDS:
        raise ValueError(f"{name!r} is not a lane state, candidate or provider result name")
    return name


def _document_bytes(document: dict[str, Any]) -> bytes:
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def _carries(bd: BoardDir, identity: RunIdentity) -> bool:
    for name in bd.fs.listdir(bd.fd):
        entry = names.parse(name)
        ours = entry.task_id == identity.task_id and entry.run_id == identity.run_id
        if (
            entry.kind in (names.Kind.PENDING, names.Kind.PREPARED) and ours
        ) or entry.kind is names.Kind.STAGING:
            pinned = pin(bd.fs, bd.fd, name)
            if pinned is None:
                continue
            with pinned:
                if pinned.payload is not None and _speaks_for(bd, entry, pinned.payload, identity):
                    return True
    return False


def _speaks_for(
    bd: BoardDir, entry: names.EntryName, payload: bytes, identity: RunIdentity
) -> bool:
    if entry.kind is names.Kind.STAGING:
        record = staged_record(bd.board, entry, payload)
        return record is not None and carries_result(record) and record.identity == identity
    try:
        judge(payload, identity, State(str(entry.kind)), entry.digest)
    except Invalid:
        return False
    return True
