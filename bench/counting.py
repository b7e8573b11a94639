"""An FS that counts fsyncs on the way through to the real one."""

from __future__ import annotations

import threading
from typing import Any

from journal.fs import FS, LinuxFS


class CountingFS:
    """Delegates every journal filesystem operation; counts ``fsync`` calls."""

    def __init__(self, inner: FS | None = None) -> None:
        self._inner: FS = inner if inner is not None else LinuxFS()
        self._lock = threading.Lock()
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self._inner.fsync(fd)
        with self._lock:
            self.fsyncs += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
