"""A task's provider log on a page: its last lines, and what a running task adds to it.

The lines are rendered as ``lane-runner logs`` renders them (``cli/transcript``), then
through ``text.shown`` (redacted, control characters inert). The log is opened without
following links (``files.open_reader``) and read from its end, so a long log costs one
bounded read; a rotation (the file replaced, or shorter than where a follower was) starts
the follower again at the new file's start.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from lane_runner import files
from lane_runner.cli import transcript
from lane_runner.web.text import shown

log = logging.getLogger(__name__)

#: How far back from its end the page reads a log.
TAIL_BYTES = 64 * 1024
#: The lines a page shows at most.
TAIL_LINES = 200
#: What one follower's read takes at most (the rest comes at its next read).
READ_BYTES = 256 * 1024


def _rendered(data: bytes) -> list[str]:
    found = []
    for line in data.decode("utf-8", "replace").splitlines():
        said = transcript.render(line)
        if said is not None:
            found.append(str(shown(said)))
    return found


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The log's last ``lines`` rendered lines; none when there is no log (yet)."""
    try:
        with files.open_reader(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - TAIL_BYTES)
            handle.seek(start)
            data = handle.read(TAIL_BYTES)
    except OSError:
        return []
    if start:
        data = data.partition(b"\n")[2]  # the first line was cut
    return _rendered(data)[-lines:]


def last_line(path: Path) -> str | None:
    """What the run said last (the rendered log's last line), for the runs in flight."""
    found = tail(path, 1)
    return found[0] if found else None


class Follower:
    """New lines of a growing log, from the end it had when the follower began."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.inode: int | None = None
        self.offset = 0
        self.carry = b""
        try:
            found = os.stat(path)
            self.inode, self.offset = found.st_ino, found.st_size
        except OSError:
            return  # no log yet: the run's first line starts it

    def read(self) -> list[str]:
        """The complete lines written since the last read, rendered."""
        try:
            with files.open_reader(self.path) as handle:
                found = os.fstat(handle.fileno())
                if found.st_ino != self.inode or found.st_size < self.offset:
                    self.inode, self.offset, self.carry = found.st_ino, 0, b""  # rotated
                handle.seek(self.offset)
                data = handle.read(READ_BYTES)
        except OSError as error:
            log.debug("log %s not readable now (%s); the next read tries again", self.path, error)
            return []
        self.offset += len(data)
        whole, _, self.carry = (self.carry + data).rpartition(b"\n")
        return _rendered(whole) if whole else []
