"""Identity-safe removal of exactly one inode (§4 promise 4).

There is no "unlink this inode" system call: unlinking a name removes whatever
the name points at now, which may be a replacement a writer just put there.
So retirement first moves the name aside to a private staging name
(``.retire.<p>.<s>.<k>``, no-replace), then looks at what it moved: the inode
it inspected is unlinked; anything else is renamed back, again without
replacing anything newer. A crash in between leaves the staging entry, which
recovery promotes (if it carries an accepted result) or quarantines.
"""

from __future__ import annotations

import enum
import errno
import os

from journal import names
from journal.fs import FS
from journal.pin import same_inode


class Retirement(enum.StrEnum):
    RETIRED = "retired"
    #: The name was already gone.
    MISSING = "missing"
    #: Another inode holds the name (a writer raced us); it was left in place.
    REPLACED = "replaced"
    #: A replacement was moved aside and an even newer entry took the name, so the
    #: replacement stays under its staging name for recovery to judge.
    STRANDED = "stranded"


def retire(
    fs: FS,
    dir_fd: int,
    name: str,
    inspected: os.stat_result,
    origin: str | None = None,
    *,
    durable: bool = True,
) -> Retirement:
    """Remove ``name`` if and only if it still is the ``inspected`` inode.

    Durable on return unless ``durable`` is False: the caller then accepts that a
    power loss may bring the entry back (which must be harmless: see commit.py).
    ``origin`` is the canonical name the staging name binds to (defaults to ``name``).
    """
    try:
        current = fs.lstat(dir_fd, name)
    except FileNotFoundError:
        return Retirement.MISSING
    if not same_inode(current, inspected):
        return Retirement.REPLACED
    staged = _stage(fs, dir_fd, name, inspected, origin or name)
    if staged is None:
        return Retirement.MISSING
    moved = fs.lstat(dir_fd, staged)
    if same_inode(moved, inspected):
        fs.unlink(dir_fd, staged)
        if durable:
            fs.fsync(dir_fd)
        return Retirement.RETIRED
    try:
        fs.rename_noreplace(dir_fd, staged, dir_fd, name)
        outcome = Retirement.REPLACED
    except FileExistsError:
        outcome = Retirement.STRANDED
    fs.fsync(dir_fd)
    return outcome


def _stage(fs: FS, dir_fd: int, name: str, inspected: os.stat_result, origin: str) -> str | None:
    for attempt in range(names.STAGING_ATTEMPTS):
        staged = names.staging(origin, inspected.st_dev, inspected.st_ino, attempt)
        try:
            fs.rename_noreplace(dir_fd, name, dir_fd, staged)
        except FileExistsError:
            continue
        except FileNotFoundError:
            return None
        return staged
    raise OSError(errno.EEXIST, "every staging name is taken", name)
