"""A SQLite connection that knows which file it opened, so a replaced one is never used on.

A board file can be removed, restored from a backup or made anew under a daemon
that keeps its connections open (``rm`` and ``board create``, a restore by
``mv``, Hermes's ``boards rm``). A connection keeps reading and writing the file
it opened, which is then no board: commits lost, changes never seen. Each
long-lived connection therefore remembers the file's device and inode, and its
owner compares them with what the path names now before using it
(docs/ARCHITECTURE.md §5, coexistence). ``os.stat`` opens nothing, so this costs
no lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

Identity = tuple[int, int]


def identity(path: Path) -> Identity | None:
    """The device and inode ``path`` names now; None when nothing is there."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


class FileConnection:
    """``connect(path)`` and the file it opened.

    The path is looked at before and after the connection opens: a file replaced
    in between leaves it unknown which one SQLite opened, so that is refused
    (``sqlite3.OperationalError``, retried by the caller's next look).
    """

    def __init__(self, path: Path, connect: Callable[[Path], sqlite3.Connection]) -> None:
        before = identity(path)
        if before is None:
            raise sqlite3.OperationalError(f"{path} does not exist (removed?)")
        self.connection = connect(path)
        after = identity(path)
        if after != before:
            self.connection.close()
            raise sqlite3.OperationalError(f"{path} was replaced or removed while it was opened")
        self.identity: Identity = before

    def is_current(self, path: Path) -> bool:
        """Whether ``path`` still names the file this connection has open."""
        return identity(path) == self.identity

    def close(self) -> None:
        self.connection.close()
