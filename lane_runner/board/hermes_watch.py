"""Wake-ups for a Hermes home without polling its database.

Hermes keeps each board in SQLite WAL mode, so every commit by anyone (the
``hermes`` CLI, its gateway, its workers, other runners) appends to
``kanban.db-wal`` beside ``kanban.db``. One inotify descriptor watches the
directories holding those files (and the ones where new boards appear); a change
counts when a database or WAL file's size or modification time moved, so writes
to other files there (logs, board.json) do not wake the daemon. Where inotify is
unavailable ``DirectoryWatch`` degrades to short sleeps and the stamps still decide.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from lane_runner.board.hermes_home import board_db
from lane_runner.board.inotify import DirectoryWatch

#: After a write is seen, how long SQLite may take to publish the commit (wal-index update).
SETTLE_LOOKS, SETTLE_DELAY = 5, 0.005
Stamp = tuple[tuple[str, ...], tuple[tuple[int, int] | None, ...]]


class HermesWatch:
    def __init__(self, home: Path, slugs: Callable[[], list[str]]) -> None:
        self._home = home
        self._slugs = slugs
        self._stamp = self._take()
        self._watch = self._new_watch(self._stamp[0])

    def _files(self, slugs: tuple[str, ...]) -> list[Path]:
        files = []
        for slug in slugs:
            database = board_db(self._home, slug)
            files += [database, database.with_name(database.name + "-wal")]
        return files

    def _take(self) -> Stamp:
        slugs = tuple(self._slugs())
        return slugs, tuple(_stat(path) for path in self._files(slugs))

    def _new_watch(self, slugs: tuple[str, ...]) -> DirectoryWatch:
        kanban = self._home / "kanban"
        places = {self._home, kanban, kanban / "boards"}
        places |= {board_db(self._home, slug).parent for slug in slugs}
        return DirectoryWatch(*sorted(p for p in places if p.is_dir()))

    def _changed(self) -> bool:
        stamp = self._take()
        if stamp == self._stamp:
            return False
        if stamp[0] != self._stamp[0]:
            self._watch.close()
            self._watch = self._new_watch(stamp[0])
        self._stamp = stamp
        return True

    def wait(self, timeout: float) -> bool:
        """True as soon as a served board committed or the set of boards changed."""
        deadline = time.monotonic() + timeout
        while not self._changed():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._watch.wait(remaining) and self._settles():
                return True
        return True

    def _settles(self) -> bool:
        for _ in range(SETTLE_LOOKS):
            time.sleep(SETTLE_DELAY)
            if self._changed():
                return True
        return False

    def close(self) -> None:
        self._watch.close()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_size, status.st_mtime_ns
