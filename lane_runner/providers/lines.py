"""Byte streams to bounded lines, and a bounded tail of what was seen.

A CLI can print a single multi-gigabyte line (a tool dumping a binary); the
splitter caps any line at ``cap`` bytes, marks it truncated and skips the rest
of it, so memory stays bounded whatever the child writes.
"""

from __future__ import annotations

from collections import deque

LINE_CAP = 10 * 1024 * 1024
TRUNCATED = b" [lane-runner: line truncated]"


class LineSplitter:
    def __init__(self, cap: int = LINE_CAP) -> None:
        self._cap = cap
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """Complete lines (without newline) found once ``chunk`` is appended."""
        self._buffer += chunk
        lines: list[bytes] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > self._cap:
                    self._cut(lines)
                return lines
            if self._skipping:
                self._skipping = False
            elif end > self._cap:
                lines.append(bytes(self._buffer[: self._cap]) + TRUNCATED)
            else:
                lines.append(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]

    def finish(self) -> list[bytes]:
        """The unterminated last line, if any, once the stream ended."""
        rest = b"" if self._skipping else bytes(self._buffer)
        self._buffer.clear()
        return [rest] if rest else []

    def _cut(self, lines: list[bytes]) -> None:
        if not self._skipping:
            lines.append(bytes(self._buffer[: self._cap]) + TRUNCATED)
            self._skipping = True
        self._buffer.clear()


class Tail:
    """The last ``limit`` bytes of output lines (each cut at ``line_limit``), text on demand."""

    def __init__(self, limit: int = 64 * 1024, line_limit: int = 4096) -> None:
        self._limit = limit
        self._line_limit = line_limit
        self._lines: deque[bytes] = deque()
        self._size = 0

    def extend(self, lines: list[bytes]) -> None:
        """Add a batch of lines; the ones later lines of the batch push out are never kept.

        A chunk of output holds hundreds of lines, most of them pushed out by the last few,
        and nothing is decoded until ``text`` is asked for.
        """
        start, room = len(lines), self._limit
        while start > 0 and room > 0:
            start -= 1
            room -= min(len(lines[start]), self._line_limit) + 1
        for line in lines[start:]:
            kept = line[: self._line_limit]
            self._lines.append(kept)
            self._size += len(kept) + 1
        while self._size > self._limit and len(self._lines) > 1:
            self._size -= len(self._lines.popleft()) + 1

    def text(self) -> str:
        return "\n".join(line.decode("utf-8", errors="replace") for line in self._lines)
