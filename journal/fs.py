"""The filesystem operations the journal uses, behind one small interface.

In the spirit of SQLite's VFS: every effect the journal has on disk goes through
an ``FS``, so tests can substitute one that fails the Nth operation, kills the
process at step N, or forgets whatever was never fsynced. ``LinuxFS`` is the
real one. Every name is resolved relative to a directory descriptor the caller
holds open, and no operation follows a symbolic link.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

_RENAME_NOREPLACE = 1
#: errnos meaning "this filesystem or kernel cannot do renameat2 no-replace".
_NOREPLACE_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK so that opening a FIFO that raced in after the type check never blocks.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_UNNAMED_FLAGS = os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC
#: errnos meaning "this filesystem or kernel has no O_TMPFILE".
_UNNAMED_UNSUPPORTED = frozenset({errno.EISDIR, errno.EINVAL, errno.EOPNOTSUPP})


class FS(Protocol):
    """The filesystem operations of the journal; names are relative to ``dir_fd``."""

    def open_root(self, path: Path) -> int: ...
    def open_dir(self, dir_fd: int, name: str) -> int: ...
    def open_read(self, dir_fd: int, name: str) -> int: ...
    def create(self, dir_fd: int, name: str) -> int: ...
    def create_unnamed(self, dir_fd: int) -> int | None: ...
    def link_unnamed(self, fd: int, dir_fd: int, name: str) -> None: ...
    def mkdir(self, dir_fd: int, name: str) -> None: ...
    def lstat(self, dir_fd: int, name: str) -> os.stat_result: ...
    def fstat(self, fd: int) -> os.stat_result: ...
    def read(self, fd: int, size: int) -> bytes: ...
    def write(self, fd: int, data: bytes) -> int: ...
    def fsync(self, fd: int) -> None: ...
    def close(self, fd: int) -> None: ...
    def listdir(self, dir_fd: int) -> list[str]: ...
    def rename(self, dir_fd: int, source: str, target: str) -> None: ...
    def rename_noreplace(
        self, dir_fd: int, source: str, target_dir_fd: int, target: str
    ) -> None: ...
    def unlink(self, dir_fd: int, name: str) -> None: ...
    def noreplace_method(self, dir_fd: int) -> str: ...


def _renameat2() -> Any:
    function = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if function is None:
        return None
    function.argtypes = (
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    )
    function.restype = ctypes.c_int
    return function


class LinuxFS:
    """The real filesystem, via ``os`` and ``renameat2`` (through ctypes).

    ``force_link_fallback`` takes the portable paths even where the better ones
    work, so they are tested for real: rename-no-replace by ``link`` + ``unlink``,
    and new files written under a temporary name instead of unnamed.
    """

    def __init__(self, *, force_link_fallback: bool = False) -> None:
        self.force_link_fallback = force_link_fallback
        self._renameat2 = None if force_link_fallback else _renameat2()
        self._unnamed = not force_link_fallback

    def open_root(self, path: Path) -> int:
        return os.open(path, _DIR_FLAGS)

    def open_dir(self, dir_fd: int, name: str) -> int:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)

    def open_read(self, dir_fd: int, name: str) -> int:
        return os.open(name, _READ_FLAGS, dir_fd=dir_fd)

    def create(self, dir_fd: int, name: str) -> int:
        return os.open(name, _CREATE_FLAGS, 0o600, dir_fd=dir_fd)

    def create_unnamed(self, dir_fd: int) -> int | None:
        """A new file with no name yet (``O_TMPFILE``), or None where the filesystem has none.

        Linked into place by ``link_unnamed``; one that never is vanishes with its
        descriptor, so a crash leaves no temporary file behind.
        """
        if self._unnamed:
            try:
                return os.open(".", _UNNAMED_FLAGS, 0o600, dir_fd=dir_fd)
            except OSError as error:
                if error.errno not in _UNNAMED_UNSUPPORTED:
                    raise
                log.info("no unnamed files here (%s); using temporary names", error.strerror)
                self._unnamed = False
        return None

    def link_unnamed(self, fd: int, dir_fd: int, name: str) -> None:
        """Give the unnamed file ``fd`` the name ``name``; FileExistsError, never a replace."""
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)

    def mkdir(self, dir_fd: int, name: str) -> None:
        os.mkdir(name, 0o700, dir_fd=dir_fd)

    def lstat(self, dir_fd: int, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)

    def fstat(self, fd: int) -> os.stat_result:
        return os.fstat(fd)

    def read(self, fd: int, size: int) -> bytes:
        return os.read(fd, size)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def listdir(self, dir_fd: int) -> list[str]:
        return os.listdir(dir_fd)

    def rename(self, dir_fd: int, source: str, target: str) -> None:
        os.rename(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def rename_noreplace(self, dir_fd: int, source: str, target_dir_fd: int, target: str) -> None:
        """Rename without ever replacing ``target``; FileExistsError when it exists."""
        if self._renameat2 is not None:
            result = self._renameat2(
                dir_fd, os.fsencode(source), target_dir_fd, os.fsencode(target), _RENAME_NOREPLACE
            )
            if result == 0:
                return
            code = ctypes.get_errno()
            if code not in _NOREPLACE_UNSUPPORTED:
                raise OSError(code, os.strerror(code), source, None, target)
            log.info("renameat2 no-replace refused (%s); using link + unlink", os.strerror(code))
        # link() fails with EEXIST rather than replacing, which is the whole guarantee.
        os.link(source, target, src_dir_fd=dir_fd, dst_dir_fd=target_dir_fd, follow_symlinks=False)
        os.unlink(source, dir_fd=dir_fd)

    def unlink(self, dir_fd: int, name: str) -> None:
        os.unlink(name, dir_fd=dir_fd)

    def noreplace_method(self, dir_fd: int) -> str:
        """``"renameat2"`` or ``"link+unlink"``: what rename-no-replace gets in ``dir_fd``.

        Probed by renaming a missing name: a kernel and filesystem that support the
        flag answer ENOENT, ones that do not answer EINVAL/ENOSYS/EOPNOTSUPP.
        """
        if self._renameat2 is None:
            return "link+unlink"
        probe = b".noreplace-probe.missing"
        if self._renameat2(dir_fd, probe, dir_fd, probe + b".target", _RENAME_NOREPLACE) == 0:
            return "renameat2"
        return "link+unlink" if ctypes.get_errno() in _NOREPLACE_UNSUPPORTED else "renameat2"
