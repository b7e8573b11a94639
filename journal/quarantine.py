"""Quarantine: a bounded diagnostic of an untrusted entry, then its identity-safe removal.

The diagnostic (``<board>/quarantine/<name>.<reason>.<fp>.<k>.quarantine``)
records what the entry was -- kind, size, inode, SHA-256 of at most its first
64 KiB -- and never its payload, which may be hostile or huge. It is made
durable before the entry is retired, so an operator can always see why
something disappeared. Directories are diagnosed once and left in place:
recovery never descends into or removes a directory it did not create.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

import schemas
from journal import atomic, names
from journal.fs import FS
from journal.pin import Pinned
from journal.record import RunIdentity, now_text
from journal.retire import Retirement, retire

SCHEMA = "quarantine-diagnostic.schema.json"


@dataclass(frozen=True)
class Quarantined:
    diagnostic: str | None
    retirement: Retirement | None


def diagnose(
    board: str, pinned: Pinned, reason: str, identity: RunIdentity | None
) -> dict[str, Any]:
    """The diagnostic document for ``pinned``; pure, and valid against the schema."""
    read = pinned.fd is not None
    document: dict[str, Any] = {
        "format": 1,
        "board": board,
        "original_name": names.printable(pinned.name),
        "reason": reason,
        "kind": pinned.kind,
        "size": pinned.stat.st_size,
        "inode": f"{pinned.stat.st_dev:x}-{pinned.stat.st_ino:x}",
        "sha256": hashlib.sha256(pinned.prefix).hexdigest() if read else None,
        "hashed_bytes": len(pinned.prefix),
        "hash_complete": read and len(pinned.prefix) == pinned.stat.st_size,
        "recorded_at": now_text(),
        "disposition": "leave-in-place" if pinned.kind == "directory" else "retire",
    }
    if identity is not None:
        document["task_id"] = identity.task_id
        document["run_id"] = identity.run_id
    if (error := schemas.first_error(SCHEMA, document)) is not None:
        raise ValueError(f"quarantine diagnostic does not match its schema: {error}")
    return document


def fingerprint(pinned: Pinned) -> str:
    """``<fp>``: the content hash when it was read, else the inode (stable for directories)."""
    if pinned.fd is not None:
        return hashlib.sha256(pinned.prefix).hexdigest()[:16]
    seed = f"{pinned.kind}:{pinned.stat.st_dev:x}-{pinned.stat.st_ino:x}"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def quarantine(
    fs: FS,
    board_fd: int,
    board: str,
    pinned: Pinned,
    reason: str,
    identity: RunIdentity | None = None,
) -> Quarantined:
    """Write the diagnostic durably, then retire exactly the pinned inode.

    Raises OSError when the quarantine directory is unusable; the entry is then
    left untouched, so nothing disappears without a diagnostic.
    """
    document = diagnose(board, pinned, reason, identity)
    payload = orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
    quarantine_fd = _open_quarantine(fs, board_fd)
    try:
        fp = fingerprint(pinned)
        if pinned.kind == "directory":
            return Quarantined(
                _diagnose_once(fs, quarantine_fd, pinned.name, reason, fp, payload), None
            )
        for attempt in range(names.STAGING_ATTEMPTS):
            name = names.quarantine(pinned.name, reason, fp, attempt)
            if atomic.write_new(fs, quarantine_fd, name, payload) is not None:
                break
        else:
            raise FileExistsError(
                f"every quarantine name for {names.printable(pinned.name)} is taken"
            )
    finally:
        fs.close(quarantine_fd)
    return Quarantined(name, retire(fs, board_fd, pinned.name, pinned.stat))


def _diagnose_once(
    fs: FS, quarantine_fd: int, entry: str, reason: str, fp: str, payload: bytes
) -> str | None:
    """A directory stays where it is, so it is diagnosed only the first time it is seen."""
    name = names.quarantine(entry, reason, fp, 0)
    return name if atomic.write_new(fs, quarantine_fd, name, payload) is not None else None


def _open_quarantine(fs: FS, board_fd: int) -> int:
    try:
        fs.mkdir(board_fd, names.QUARANTINE_DIR)
    except FileExistsError:
        pass
    else:
        fs.fsync(board_fd)
    return fs.open_dir(board_fd, names.QUARANTINE_DIR)
