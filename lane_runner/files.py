"""Files of the home and the worktrees, opened as if someone hostile planted them.

The runner's own files (status.json, lane state, provider
health, task logs, the worker's result file, the node id, the lock's holder) sit
in directories another process may write to: an operator's mistake, a worker
user, an attacker. A symbolic link there must never be followed (as root the
runner would overwrite or re-mode the target, or read it into board rows), and a
FIFO or device must never be waited on (the daemon would block forever and then
ignore SIGTERM). So every open here:

- opens the parent directory ``O_DIRECTORY|O_NOFOLLOW`` and the name relative to it
  (a symlinked ``lanes/<board>`` or ``provider-health`` is refused too);
- adds ``O_NOFOLLOW|O_NONBLOCK`` and checks with ``fstat`` that it got a regular file;
- moves a bad entry aside as ``<name>.aside-<kind>-<ns>`` with a warning, so the
  next open finds the name free and nobody wonders where the file went.

The journal does the same for its records with inode pinning (``journal/pin.py``);
this module serves the files the journal does not own. Writes are atomic
(a new private file, fsync, rename over the name, fsync the directory); rename
replaces a planted link itself, never its target.

The operator's own inputs are different (``read_operator_file``): Kubernetes mounts
every ConfigMap and Secret key as a link (``config.toml -> ..data/config.toml``), so
such a file is read through its links, provided what it reaches is a regular file
that only root or the runner's own user can write: a worker user cannot feed the
runner a configuration of its own through a link. A ``config.toml`` that is no link
is read like the runner's own files.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pwd
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from journal.pin import kind_of
from lane_runner.errors import LaneRunnerError, UsageError

log = logging.getLogger(__name__)

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
#: What a worker user must read (the result schema, the claude settings): no secrets.
SHARED_FILE = 0o644
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND_FLAGS = (
    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
)
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: What open(2) answers for a symbolic link under O_NOFOLLOW (ELOOP), or a special
#: file it cannot open as asked (ENXIO: a FIFO with no reader opened for writing).
_REFUSED = frozenset({errno.ELOOP, errno.ENXIO, errno.EISDIR})


class UnsafePath(LaneRunnerError, OSError):
    """A directory on the way is a symbolic link or not a directory: nothing is opened.

    An OSError to the code that opens files, and a LaneRunnerError to the command line,
    which prints its one line instead of a traceback."""


class RefusedInput(UsageError):
    """An operator's file reached through a link, or named by a setting, that the runner
    will not read: missing, not a regular file, or writable by someone else."""


@contextlib.contextmanager
def directory(path: Path) -> Iterator[int]:
    """``path`` opened as a directory without following a link; UnsafePath when it is one."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(
                error.errno,
                f"{path} is a symbolic link or not a directory; lane-runner does not follow it: "
                "move it aside and let lane-runner recreate the directory",
            ) from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def move_aside(dir_fd: int, name: str, kind: str, where: Path) -> str:
    """Rename entry ``name`` to ``<name>.aside-<kind>-<ns>`` and say so; the new name."""
    aside = f"{name}.aside-{kind}-{time.time_ns()}"
    os.rename(name, aside, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    log.warning(
        "%s is a %s, not a file lane-runner wrote: moved aside to %s (never followed or read)",
        where / name,
        kind,
        aside,
    )
    return aside


def _entry_kind(dir_fd: int, name: str) -> str:
    try:
        return kind_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return "missing"


def _open_regular(
    dir_fd: int, name: str, flags: int, where: Path, *, move_bad: bool = True
) -> int:
    """``name`` opened with ``flags`` when it is a regular file; a bad one is moved aside
    and FileNotFoundError raised, so callers treat it as absent.

    The entry is looked at first, so a device is never even opened; the flags and the
    ``fstat`` after the open cover an entry swapped in between.
    """
    kind = _entry_kind(dir_fd, name)
    if kind not in ("missing", "regular"):
        if move_bad:
            move_aside(dir_fd, name, kind, where)
        raise FileNotFoundError(errno.ENOENT, f"{where / name} is a {kind}, not a file")
    try:
        fd = os.open(name, flags, PRIVATE_FILE, dir_fd=dir_fd)
    except OSError as error:
        kind = _entry_kind(dir_fd, name) if error.errno in _REFUSED else "regular"
        if kind in ("missing", "regular"):
            raise
        if move_bad:
            move_aside(dir_fd, name, kind, where)
        raise FileNotFoundError(errno.ENOENT, f"{where / name} is a {kind}, not a file") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    kind = kind_of(mode)
    if move_bad:
        move_aside(dir_fd, name, kind, where)
    raise FileNotFoundError(errno.ENOENT, f"{where / name} is a {kind}, not a file")


def read(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of regular file ``path`` (so a caller can tell it is
    too long). FileNotFoundError when absent, or when what was there was not a regular
    file (moved aside); UnsafePath when its directory is a link."""
    return read_entry(path, limit)[0]


def read_entry(path: Path, limit: int) -> tuple[bytes, os.stat_result]:
    """``read``, with the ``fstat`` of the very file read (its mtime, its size)."""
    with directory(path.parent) as dir_fd:
        fd = _open_regular(dir_fd, path.name, _READ_FLAGS, path.parent)
    try:
        return _read_upto(fd, limit), os.fstat(fd)
    finally:
        os.close(fd)


def read_workers(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path``, a file a worker can write, read by a runner
    that may be root: a link at the name or its directory is not followed and a FIFO
    or device is not opened (FileNotFoundError, UnsafePath), nothing is read past the
    bound, and nothing is moved aside (the entry is the worker's, not the runner's)."""
    with directory(path.parent) as dir_fd:
        fd = _open_regular(dir_fd, path.name, _READ_FLAGS, path.parent, move_bad=False)
    try:
        return _read_upto(fd, limit)
    finally:
        os.close(fd)


def _read_upto(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes from ``fd``'s position on."""
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_operator_file(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the operator's file ``path``, following its links.

    What is opened must be a regular file owned by root or by the runner's own user
    that neither group nor others may write (checked on the descriptor read, so a
    swap after the check reads nothing else); otherwise ``RefusedInput`` says why and
    what to do. The entry is looked at before the open, so a device is never opened.
    """
    try:
        kind = kind_of(os.stat(path).st_mode)
        if kind != "regular":
            raise RefusedInput(f"{_shown(path)} is a {kind}, not a regular file")
        fd = os.open(path, _READ_FLAGS & ~os.O_NOFOLLOW)
    except FileNotFoundError:  # never "absent, so defaults": the operator named this file
        raise RefusedInput(f"{_shown(path)} does not exist") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise RefusedInput(f"{_shown(path)} is a {kind_of(status.st_mode)}, not a regular file")
        if writer := _foreign_writer(status):
            raise RefusedInput(
                f"{_shown(path)} can be written by {writer}: lane-runner reads an operator's "
                "file only when root or its own user alone can write it "
                f"(chmod go-w, chown root {os.path.realpath(path)})"
            )
        os.set_blocking(fd, True)
        return _read_upto(fd, limit)
    finally:
        os.close(fd)


def _shown(path: Path) -> str:
    """``path`` as an error names it: with where its links lead, when it is one."""
    target = os.path.realpath(path)
    return f"{path} (a link to {target})" if target != str(path.absolute()) else str(path)


def _foreign_writer(status: os.stat_result) -> str | None:
    """Who besides root and the runner's user may write the file ``status`` describes."""
    if status.st_uid not in (0, os.geteuid()):
        return f"its owner, uid {status.st_uid}"
    if status.st_mode & stat.S_IWOTH:
        return "every user"
    if status.st_mode & stat.S_IWGRP:
        return f"group {status.st_gid}"
    return None


def writable_by(path: Path, user: str) -> Path | None:
    """The first of ``path`` (through its links) and the directories above it that
    ``user`` may change, or None: a program the runner executes as root must not be
    one the worker user can replace, nor sit in a directory it can rename things in.

    Write permission by owner, group (the user's groups) or others; a sticky
    directory (``/tmp``) lets nobody replace what another user owns, and what lies
    below it here is not the user's (else the walk had stopped there), so its ``o+w``
    does not count.
    """
    entry = pwd.getpwnam(user)
    groups = set(os.getgrouplist(user, entry.pw_gid))
    real = Path(os.path.realpath(path))
    for each in [real, *real.parents]:
        status = os.stat(each)
        if status.st_uid == entry.pw_uid:
            return each
        if status.st_mode & stat.S_IWGRP and status.st_gid in groups:
            return each
        sticky = stat.S_ISDIR(status.st_mode) and status.st_mode & stat.S_ISVTX
        if status.st_mode & stat.S_IWOTH and not sticky:
            return each
    return None


def read_tail(path: Path, size: int) -> bytes:
    """The last ``size`` bytes of regular file ``path`` (same refusals as ``read``)."""
    with directory(path.parent) as dir_fd:
        fd = _open_regular(dir_fd, path.name, _READ_FLAGS, path.parent)
    try:
        end = os.fstat(fd).st_size
        return os.pread(fd, size, max(0, end - size))
    finally:
        os.close(fd)


def open_reader(path: Path) -> BinaryIO:
    """Regular file ``path`` open for reading, for commands that only look: a bad entry
    is refused (FileNotFoundError naming its kind) and left where it is."""
    with directory(path.parent) as dir_fd:
        fd = _open_regular(dir_fd, path.name, _READ_FLAGS, path.parent, move_bad=False)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def open_append(path: Path) -> int:
    """A descriptor appending to regular file ``path`` (created 0600 if absent).

    A link or special file found there is moved aside and a fresh file created.
    """
    with directory(path.parent) as dir_fd:
        try:
            fd = _open_regular(dir_fd, path.name, _APPEND_FLAGS, path.parent)
        except FileNotFoundError:
            fd = _open_regular(dir_fd, path.name, _APPEND_FLAGS, path.parent)
    os.set_blocking(fd, True)  # a regular file: O_NONBLOCK only guarded the open
    return fd


def write(path: Path, data: bytes, mode: int = PRIVATE_FILE) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old file or the new one.

    The new file is created private (``mode``, 0600 by default) next to the name,
    fsynced, renamed over it (a link there is replaced, never followed), and the
    directory fsynced. A directory planted at the name is moved aside first.
    """
    with directory(path.parent) as dir_fd:
        temporary = f".{path.name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(temporary, _NEW_FLAGS, mode, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), mode)  # the umask may have narrowed it
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            _rename_over(dir_fd, temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):  # never created or already renamed
                os.unlink(temporary, dir_fd=dir_fd)
            raise
        os.fsync(dir_fd)


def _rename_over(dir_fd: int, temporary: str, path: Path) -> None:
    try:
        os.rename(temporary, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as error:
        if error.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise
        move_aside(dir_fd, path.name, "directory", path.parent)
        os.rename(temporary, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def make_private(path: Path) -> None:
    """The regular file at ``path``, written by another program with its own umask (a
    CLI's answer), narrowed to ``PRIVATE_FILE``; nothing when it is gone, and whatever
    else is at the name (a link) is left as it is, never followed. OSError when the mode
    cannot be changed."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode) or not mode & ~PRIVATE_FILE & 0o777:
        return
    try:
        os.chmod(path, PRIVATE_FILE, follow_symlinks=False)
    except NotImplementedError:  # it became a link since lstat: links are not followed
        log.warning("%s became a link while it was made private: left as it is", path)


def clear(path: Path) -> None:
    """Free the name ``path`` for a file someone else will create: whatever is there
    (a stale file, a link, a FIFO) is moved aside, never followed or opened."""
    with directory(path.parent) as dir_fd:
        kind = _entry_kind(dir_fd, path.name)
        if kind != "missing":
            move_aside(dir_fd, path.name, "stale" if kind == "regular" else kind, path.parent)


def ensure_directory(path: Path, mode: int = PRIVATE_DIR) -> None:
    """Create ``path`` and its missing parents with exactly ``mode`` (whatever the umask);
    UnsafePath when it, or what is at its name, is a link or not a directory."""
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    for directory_path in reversed(missing):
        try:
            os.mkdir(directory_path, mode)
        except FileExistsError:
            continue  # another process made it meanwhile: checked below like any other
        os.chmod(directory_path, mode, follow_symlinks=False)
    with directory(path):
        return


def hand_over(path: Path, uid: int, gid: int) -> int:
    """Give the tree at ``path`` to ``uid``:``gid``, walking it by descriptors: each
    directory is opened ``O_NOFOLLOW`` relative to its parent, so a link planted in the
    tree, or swapped in for a directory during the walk, is re-owned itself and never
    followed out of the tree. A file with more than one link is left alone (it may be
    another's file linked in). The entries re-owned; FileNotFoundError for ``path``."""
    with directory(path) as fd:
        return _hand_over_at(fd, uid, gid)


def _hand_over_at(fd: int, uid: int, gid: int) -> int:
    os.fchown(fd, uid, gid)
    done = 1
    for entry in os.scandir(fd):
        try:
            status = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(status.st_mode):
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                try:
                    done += _hand_over_at(child, uid, gid)
                finally:
                    os.close(child)
            elif status.st_nlink == 1 or stat.S_ISLNK(status.st_mode):
                os.chown(entry.name, uid, gid, dir_fd=fd, follow_symlinks=False)
                done += 1
        except (FileNotFoundError, NotADirectoryError) as error:  # gone or swapped: skipped
            log.debug("not handed over: %s (%s)", entry.name, error)
        except OSError as error:
            if error.errno != errno.ELOOP:  # a link swapped in for a directory: skipped
                raise
    return done
