"""Inode-pinned, bounded reads of one directory entry (§4.1 step 1).

``pin`` looks at an entry without trusting it: it never follows a link, never
opens anything but a regular file (so a FIFO cannot block it), reads at most
1 MiB, and re-checks the name still points at the inode it read. The result
keeps the file descriptor open so later decisions (commit, retire, quarantine)
act on exactly the inode that was inspected. An entry that fails a check is
still returned, with ``problem`` saying why and a bounded prefix for the
quarantine diagnostic.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from types import TracebackType

from journal.fs import FS
from journal.record import MAX_RECORD_BYTES

HASH_PREFIX_BYTES = 64 * 1024


def kind_of(mode: int) -> str:
    """The entry kind named in inspection and quarantine diagnostics."""
    kinds = (
        (stat.S_ISREG, "regular"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
    )
    return next((name for test, name in kinds if test(mode)), "device")


def same_inode(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@dataclass
class Pinned:
    """One inspected entry. ``payload`` is set only when every check passed."""

    fs: FS
    dir_fd: int
    name: str
    stat: os.stat_result
    fd: int | None
    prefix: bytes
    payload: bytes | None
    problem: str | None

    @property
    def kind(self) -> str:
        if stat.S_ISREG(self.stat.st_mode) and self.stat.st_nlink != 1:
            return "hardlink"
        return kind_of(self.stat.st_mode)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            self.fs.close(fd)

    def __enter__(self) -> Pinned:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _read_bounded(fs: FS, fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = fs.read(fd, min(HASH_PREFIX_BYTES, remaining))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def pin(fs: FS, dir_fd: int, name: str) -> Pinned | None:
    """Inspect ``name`` in ``dir_fd``; None when it does not exist.

    Raises OSError only for real I/O failures (EIO and the like), which are
    transient from the journal's point of view: the caller leaves the entry for
    the next pass instead of judging it.
    """
    try:
        seen = fs.lstat(dir_fd, name)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(seen.st_mode):
        return Pinned(fs, dir_fd, name, seen, None, b"", None, kind_of(seen.st_mode))
    try:
        fd = fs.open_read(dir_fd, name)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENXIO):
            raise
        # Swapped for a symlink or a device between lstat and open.
        return Pinned(fs, dir_fd, name, seen, None, b"", None, "changed-during-open")
    pinned = Pinned(fs, dir_fd, name, seen, fd, b"", None, None)
    try:
        _inspect(pinned)
    except BaseException:
        pinned.close()
        raise
    return pinned


def _stable(pinned: Pinned, opened: os.stat_result, payload: bytes) -> bool:
    """Whether the file read is still the one named, of the size and modification time
    it had when opened: nothing replaced or wrote it while it was read."""
    fs, fd = pinned.fs, pinned.fd
    assert fd is not None
    after = fs.fstat(fd)
    try:
        named = fs.lstat(pinned.dir_fd, pinned.name)
    except FileNotFoundError:
        named = None
    return (
        named is not None
        and same_inode(named, opened)
        and len(payload) == opened.st_size == after.st_size
        and after.st_mtime_ns == opened.st_mtime_ns
    )


def _inspect(pinned: Pinned) -> None:
    fs, fd = pinned.fs, pinned.fd
    assert fd is not None
    opened = fs.fstat(fd)
    moved = not same_inode(opened, pinned.stat)
    pinned.stat = opened
    if moved or not stat.S_ISREG(opened.st_mode):
        pinned.problem = "changed-during-open"
        return
    if opened.st_nlink != 1 or opened.st_size > MAX_RECORD_BYTES:
        pinned.prefix = _read_bounded(fs, fd, HASH_PREFIX_BYTES)
        pinned.problem = "hardlinked" if opened.st_nlink != 1 else "oversized"
        return
    payload = _read_bounded(fs, fd, MAX_RECORD_BYTES + 1)
    pinned.prefix = payload[:HASH_PREFIX_BYTES]
    if not _stable(pinned, opened, payload):
        pinned.problem = "unstable"
        return
    pinned.payload = payload
