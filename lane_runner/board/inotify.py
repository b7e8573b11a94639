"""Block until a file in a directory is written: inotify through ctypes, a few lines.

The embedded board's wake-up. Every SQLite commit in WAL mode appends to
``<board>.db-wal`` and a new board creates a file, so a watch on the boards
directory wakes the daemon the moment any process commits, without polling.
Where inotify is unavailable (another OS, the watch limit reached) ``wait``
degrades to a short sleep, and the caller's own change check still decides.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

IN_MODIFY = 0x002
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
FALLBACK_SLEEP = 0.02


class DirectoryWatch:
    """One inotify descriptor watching ``directory`` and any ``more`` directories."""

    def __init__(self, directory: Path, *more: Path) -> None:
        self._fd: int | None = None
        try:
            self._fd = _watch(directory, *more)
        except OSError as error:
            # Safe: the store still sees every change, only by polling every 20 ms.
            log.warning(
                "inotify unavailable for %s (%s); polling for board changes", directory, error
            )

    def wait(self, timeout: float) -> bool:
        """True when something in the directory was written; False after ``timeout`` s."""
        if self._fd is None:
            time.sleep(min(timeout, FALLBACK_SLEEP))
            return True  # unknown: let the caller look
        readable, _, _ = select.select([self._fd], [], [], max(0.0, timeout))
        if readable:
            self._drain()
        return bool(readable)

    def _drain(self) -> None:
        assert self._fd is not None
        try:
            while os.read(self._fd, 65536):
                pass
        except BlockingIOError:
            pass  # drained: the events themselves carry nothing the caller needs

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


SETTLE_DELAY = 0.005  # seconds between looks after a write event


def wait_for_commit(
    watch: Callable[[], DirectoryWatch | None],
    changed: Callable[[], bool],
    timeout: float,
    settle_looks: int,
) -> bool:
    """True as soon as ``changed()``; False after ``timeout`` s or without a watch.

    Between looks it blocks on ``watch()`` (asked each time: ``changed`` may replace
    it), so waiting costs no CPU. A write event comes before its commit is visible
    (SQLite writes the WAL first), so after one it looks again every few ms, up to
    ``settle_looks`` times, before it waits again.
    """
    deadline = time.monotonic() + timeout
    while not changed():
        remaining = deadline - time.monotonic()
        current = watch()
        if remaining <= 0 or current is None:
            return False
        if current.wait(remaining) and _settles(changed, settle_looks):
            return True
    return True


def _settles(changed: Callable[[], bool], looks: int) -> bool:
    for _ in range(looks):
        time.sleep(SETTLE_DELAY)
        if changed():
            return True
    return False


def _watch(*directories: Path) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd: int = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    mask = IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE
    for directory in directories:
        if libc.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
            errno = ctypes.get_errno()
            os.close(fd)
            raise OSError(errno, os.strerror(errno), str(directory))
    return fd
