"""The per-task provider log: appended across attempts, rotated by size mid-run.

A run can stream for twelve hours; rotating while it runs (not between runs)
keeps one chatty CLI from filling the disk. ``<log>.1`` is the newest rotated
part, up to ``keep`` parts are kept.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import BinaryIO

from lane_runner import files


class TaskLog:
    def __init__(self, path: Path, rotate_bytes: int, keep: int = 3) -> None:
        self.path = path
        self._rotate_bytes = max(rotate_bytes, 1)
        self._keep = keep
        files.ensure_directory(path.parent)
        self._file: BinaryIO = self._open()
        self._size = self._file.tell()

    def _open(self) -> BinaryIO:
        # A link or FIFO planted at the log's name is moved aside, never followed or waited on.
        return os.fdopen(files.open_append(self.path), "ab")

    def write_line(self, line: bytes, prefix: bytes = b"") -> None:
        size = len(prefix) + len(line) + 1
        if self._size and self._size + size > self._rotate_bytes:
            self._rotate()
        self._file.write(prefix + line + b"\n")
        self._size += size

    def write_lines(self, lines: list[bytes]) -> None:
        """A batch of output lines: one write when they fit in the current part."""
        size = sum(map(len, lines)) + len(lines)
        if not lines or self._size + size > self._rotate_bytes:
            for line in lines:
                self.write_line(line)
            return
        self._file.write(b"\n".join(lines) + b"\n")
        self._size += size

    def note(self, text: str) -> None:
        """A runner-authored line, timestamped so it stands out from CLI output."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.write_line(f"[{stamp}] lane-runner: {text}".encode())
        self.flush()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def _rotate(self) -> None:
        self._file.close()
        for index in range(self._keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        self._file = self._open()
        self._size = 0
