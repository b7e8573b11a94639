"""Inspection: every entry of a board directory with its identity, state and validity.

Read-only, for the operator commands: it pins and judges each entry exactly as
recovery would, but changes nothing, so ``valid``/``reason`` say in advance what
recovery will do with an entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

import schemas
from journal import names
from journal.fs import FS
from journal.lanes import BoardDir, boards, open_board
from journal.pin import Pinned, pin
from journal.quarantine import SCHEMA as DIAGNOSTIC_SCHEMA
from journal.record import Invalid, RunIdentity, State, judge
from journal.recovery import staged_record

DIAGNOSTIC_KIND = "quarantine-diagnostic"


@dataclass(frozen=True)
class Entry:
    path: Path
    board: str
    name: str
    kind: str
    file_kind: str
    task_id: str | None
    run_id: int | None
    size: int
    mtime: float
    valid: bool
    reason: str | None
    digest: str | None


@dataclass(frozen=True)
class _Verdict:
    valid: bool
    reason: str | None = None
    digest: str | None = None


def entries(fs: FS, lanes_root: Path, board: str | None) -> list[Entry]:
    found: list[Entry] = []
    for slug in boards(fs, lanes_root)[0] if board is None else [board]:
        with open_board(fs, lanes_root, slug, create=False) as bd:
            found.extend(_board_entries(bd))
    return found


def _board_entries(bd: BoardDir) -> list[Entry]:
    found: list[Entry] = []
    for name in sorted(bd.fs.listdir(bd.fd)):
        parsed = names.parse(name)
        if parsed.kind is names.Kind.QUARANTINE_DIR:
            found.extend(_quarantine_entries(bd))
            continue

        def judge_entry(pinned: Pinned, parsed: names.EntryName = parsed) -> _Verdict:
            return _judge_board_entry(bd, parsed, pinned)

        found.extend(_entry(bd, bd.fd, bd.path, parsed, str(parsed.kind), judge_entry))
    return found


def _quarantine_entries(bd: BoardDir) -> list[Entry]:
    folder = bd.path / names.QUARANTINE_DIR
    try:
        quarantine_fd = bd.fs.open_dir(bd.fd, names.QUARANTINE_DIR)
    except OSError as error:
        parsed = names.EntryName(names.QUARANTINE_DIR, names.Kind.QUARANTINE_DIR)
        return [
            _row(bd, bd.path, parsed, str(parsed.kind), None, _Verdict(False, f"unusable: {error}"))
        ]
    try:
        found: list[Entry] = []
        for name in sorted(bd.fs.listdir(quarantine_fd)):
            parsed = names.EntryName(name, names.Kind.OTHER)
            found.extend(
                _entry(bd, quarantine_fd, folder, parsed, DIAGNOSTIC_KIND, _judge_diagnostic)
            )
        return found
    finally:
        bd.fs.close(quarantine_fd)


def _entry(
    bd: BoardDir,
    dir_fd: int,
    folder: Path,
    parsed: names.EntryName,
    kind: str,
    judge_pinned: Callable[[Pinned], _Verdict],
) -> list[Entry]:
    try:
        pinned = pin(bd.fs, dir_fd, parsed.name)
    except OSError as error:
        return [_row(bd, folder, parsed, kind, None, _Verdict(False, f"unreadable: {error}"))]
    if pinned is None:
        return []
    with pinned:
        verdict = (
            _Verdict(False, pinned.problem) if pinned.payload is None else judge_pinned(pinned)
        )
        return [_row(bd, folder, parsed, kind, pinned, verdict)]


def _row(
    bd: BoardDir,
    folder: Path,
    parsed: names.EntryName,
    kind: str,
    pinned: Pinned | None,
    verdict: _Verdict,
) -> Entry:
    return Entry(
        path=folder / parsed.name,
        board=bd.board,
        name=names.printable(parsed.name),
        kind=kind,
        file_kind=pinned.kind if pinned else "unknown",
        task_id=parsed.task_id,
        run_id=parsed.run_id,
        size=pinned.stat.st_size if pinned else 0,
        mtime=pinned.stat.st_mtime if pinned else 0.0,
        valid=verdict.valid,
        reason=verdict.reason,
        digest=verdict.digest,
    )


def _judge_board_entry(bd: BoardDir, parsed: names.EntryName, pinned: Pinned) -> _Verdict:
    assert pinned.payload is not None
    if parsed.kind in names.TERMINAL_KINDS:
        assert parsed.task_id is not None and parsed.run_id is not None
        identity = RunIdentity(bd.board, parsed.task_id, parsed.run_id)
        try:
            record = judge(pinned.payload, identity, State(str(parsed.kind)), parsed.digest)
        except Invalid as error:
            return _Verdict(False, error.reason)
        return _Verdict(True, digest=record.digest)
    if parsed.kind is names.Kind.STAGING:
        staged = staged_record(bd.board, parsed, pinned.payload)
        return (
            _Verdict(False, "untrusted-staging")
            if staged is None
            else _Verdict(True, digest=staged.digest)
        )
    if parsed.kind in (names.Kind.MALFORMED, names.Kind.OTHER):
        return _Verdict(
            False, "malformed-name" if parsed.kind is names.Kind.MALFORMED else "unknown-name"
        )
    return _Verdict(True) if _is_object(pinned.payload) else _Verdict(False, "malformed-payload")


def _judge_diagnostic(pinned: Pinned) -> _Verdict:
    assert pinned.payload is not None
    try:
        document = orjson.loads(pinned.payload)
    except orjson.JSONDecodeError:
        return _Verdict(False, "malformed-payload")
    error = schemas.first_error(DIAGNOSTIC_SCHEMA, document)
    return _Verdict(error is None, None if error is None else "schema-invalid")


def _is_object(payload: bytes) -> bool:
    try:
        return isinstance(orjson.loads(payload), dict)
    except orjson.JSONDecodeError:
        return False
