"""Hermes's checks of its database file, made without ever closing a descriptor of it.

SQLite's locks are POSIX record locks, and those belong to the process: when the
process closes *any* descriptor of a database file, every lock its connections hold
on that file is gone, silently. SQLite itself never does that (it parks the
descriptors of closed connections while a lock is held), but hermes-agent reads its
database through Python file objects in two places: ``connect`` checks the file's
header the first time a process opens a path (``_validate_sqlite_header``), and
``write_txn`` compares the header's page count with the file's length after every
commit (``_check_file_length_invariant``). In a Hermes CLI process that lives for one
command this goes unnoticed. In the daemon, whose connections stay open, the first
write left it holding no lock at all; the next ``hermes kanban`` command to close its
connection then found the database unused, checkpointed it and deleted ``-wal`` and
``-shm`` under the daemon's connections: ``disk I/O error``, then ``database disk
image is malformed``, until a restart (docs/ARCHITECTURE.md §5, coexistence).

``install`` replaces those two functions, in this process only, by the same checks
read through ``PINS``: one read-only descriptor per database path, opened when first
needed and closed only once the path names another file or none (the old inode is no
board any more). Opening a descriptor takes nothing from SQLite; closing one does.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

SQLITE_HEADER = b"SQLite format 3\x00"
#: Where a database header keeps the database's size in pages (4 bytes, big-endian).
PAGE_COUNT_OFFSET = 28
#: The upstream functions ``install`` replaces; ``home.check_api`` requires them.
REPLACED = ("_validate_sqlite_header", "_check_file_length_invariant")


class Pins:
    """One read-only descriptor per database path, kept while the path names its inode."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pinned: dict[str, tuple[int, int, int]] = {}  # path -> (device, inode, fd)

    def read(self, path: str, offset: int, size: int) -> tuple[bytes, int] | None:
        """``size`` bytes at ``offset`` and the file's length; None when no file is there."""
        with self._lock:
            fd = self._descriptor(path)
            if fd is None:
                return None
            return os.pread(fd, size, offset), os.fstat(fd).st_size

    def _descriptor(self, path: str) -> int | None:
        try:
            named = os.stat(path)
        except FileNotFoundError:
            self._unpin(path)
            return None
        pinned = self._pinned.get(path)
        if pinned is not None and pinned[:2] == (named.st_dev, named.st_ino):
            return pinned[2]
        self._unpin(path)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        opened = os.fstat(fd)  # the file opened, whatever replaced it since the stat
        self._pinned[path] = (opened.st_dev, opened.st_ino, fd)
        return fd

    def _unpin(self, path: str) -> None:
        """Close the descriptor of a file ``path`` no longer names: it is no board now,
        so the locks this drops on it guard nothing anyone still uses."""
        pinned = self._pinned.pop(path, None)
        if pinned is not None:
            os.close(pinned[2])


PINS = Pins()


def validate_header(path: Path) -> None:
    """Upstream's ``_validate_sqlite_header``: a non-empty file must start like a database.

    Missing and empty files pass (``connect`` creates them); unreadable ones pass too,
    as upstream lets SQLite report those itself.
    """
    try:
        read = PINS.read(str(path), 0, len(SQLITE_HEADER))
    except OSError as error:
        log.debug("header of %s not readable (%s); SQLite will say what is wrong", path, error)
        return
    if read is None or read[1] == 0 or read[0] == SQLITE_HEADER:
        return
    raise sqlite3.DatabaseError(
        f"file is not a database: invalid SQLite header for {path}; first bytes={read[0].hex(' ')}"
    )


def check_length(connection: sqlite3.Connection) -> None:
    """Upstream's ``_check_file_length_invariant``: the file holds every page its header counts.

    A shorter file is a torn extend (``sqlite3.DatabaseError``, as upstream raises);
    an in-memory database, an unreadable file or a header counting no pages is not checked.
    """
    row = connection.execute("PRAGMA database_list").fetchone()
    if row is None or not row[2]:
        return
    path = str(row[2])
    page_size = int(connection.execute("PRAGMA page_size").fetchone()[0])
    try:
        read = PINS.read(path, PAGE_COUNT_OFFSET, 4)
    except OSError as error:
        log.debug("length of %s not checked (%s); as upstream, not fatal", path, error)
        return
    if read is None or len(read[0]) < 4:
        return
    counted, length = int.from_bytes(read[0], "big"), read[1]
    if counted and length // page_size < counted:
        raise sqlite3.DatabaseError(
            f"torn-extend detected: page count mismatch on {path}: header claims "
            f"{counted} pages, file has {length // page_size} (file_size={length}, "
            f"page_size={page_size})"
        )


def install(kanban: ModuleType) -> None:
    """Make ``kanban`` (``hermes_cli.kanban_db``) check its files through ``PINS``."""
    setattr(kanban, "_validate_sqlite_header", validate_header)  # noqa: B010
    setattr(kanban, "_check_file_length_invariant", check_length)  # noqa: B010
