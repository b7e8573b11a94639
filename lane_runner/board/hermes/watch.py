"""Wake-ups for a Hermes home without polling its database.

Hermes keeps each board in SQLite WAL mode, so every commit by anyone (the
``hermes`` CLI, its gateway, its workers, other runners) writes ``kanban.db-wal``
beside ``kanban.db``. One inotify descriptor watches the directories holding those
files (and the ones where new boards appear). A write is not yet a visible commit
(SQLite fsyncs the WAL before it publishes the commit), so after each write the
watch looks at every board's ``PRAGMA data_version``, which changes once another
connection's commit is visible, for up to ``SETTLE_LOOKS`` short delays. Writes to
other files there (logs, board.json) change no version and wake nobody. Where
inotify is unavailable ``DirectoryWatch`` degrades to short sleeps.

The readers stay open for the daemon's life, so each holds SQLite's shared lock on its
board: while the daemon runs, no other process finds the database unused and deletes
its ``-wal`` and ``-shm`` (docs/ARCHITECTURE.md §5, coexistence). A reader whose file
was replaced or removed is closed and opened again on the file the path names now
(``fileconn``), never read on: a replaced board is a changed one.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from lane_runner.board.fileconn import FileConnection
from lane_runner.board.hermes.home import board_db
from lane_runner.board.inotify import DirectoryWatch, wait_for_commit

log = logging.getLogger(__name__)

#: After a write is seen, how long SQLite may take to publish the commit (fsync included).
SETTLE_LOOKS = 40
Stamp = tuple[tuple[str, ...], tuple[tuple[int, int, int] | None, ...]]


def _reader(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(
        f"{path.as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=0.1
    )


class HermesWatch:
    """What the home looked like when the store opened: every later commit is a change.

    The stamp is taken here, not at the first wait, so a commit made after the store
    opened and before the daemon first waits is still reported. The inotify watch
    itself is made at the first wait that blocks (a store that never waits holds none).
    """

    def __init__(self, home: Path, slugs: Callable[[], list[str]]) -> None:
        self._home = home
        self._slugs = slugs
        self._lock = threading.Lock()
        self._readers: dict[str, FileConnection] = {}
        self._stamp = self._take()
        self._watch: DirectoryWatch | None = None

    def _version(self, slug: str) -> tuple[int, int, int] | None:
        """The board's file and ``data_version`` (None while it cannot be read: skipped).

        The file's identity is part of the answer: a reader opened anew on a replaced
        file starts its own count, which may equal the old reader's last one.
        """
        path = board_db(self._home, slug)
        try:
            reader = self._readers.get(slug)
            if reader is not None and not reader.is_current(path):
                log.warning("Hermes board %s: %s was replaced or removed; reopening it", slug, path)
                self._readers.pop(slug).close()
                reader = None
            if reader is None:
                reader = FileConnection(path, _reader)
                self._readers[slug] = reader
            version = int(reader.connection.execute("PRAGMA data_version").fetchone()[0])
            return (*reader.identity, version)
        except sqlite3.Error as error:
            log.debug("Hermes board %s not watchable now: %s", slug, error)
            dropped = self._readers.pop(slug, None)
            if dropped is not None:
                dropped.close()
            return None

    def _take(self) -> Stamp:
        slugs = tuple(self._slugs())
        with self._lock:
            for gone in set(self._readers) - set(slugs):  # removed or archived by Hermes
                self._readers.pop(gone).close()
            return slugs, tuple(self._version(slug) for slug in slugs)

    def _new_watch(self, slugs: tuple[str, ...]) -> DirectoryWatch:
        kanban = self._home / "kanban"
        places = {self._home, kanban, kanban / "boards"}
        places |= {board_db(self._home, slug).parent for slug in slugs}
        return DirectoryWatch(*sorted(p for p in places if p.is_dir()))

    def _changed(self) -> bool:
        stamp = self._take()
        if stamp == self._stamp:
            return False
        if stamp[0] != self._stamp[0] and self._watch is not None:
            self._watch.close()
            self._watch = self._new_watch(stamp[0])
        self._stamp = stamp
        return True

    def wait(self, timeout: float) -> bool:
        """True as soon as a served board committed or the set of boards changed."""
        if timeout > 0 and self._watch is None:
            # Made before the first look, so no write between the look and the wait slips by.
            self._watch = self._new_watch(self._stamp[0])
        return wait_for_commit(lambda: self._watch, self._changed, timeout, SETTLE_LOOKS)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        with self._lock:
            readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            reader.close()
