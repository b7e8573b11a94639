"""What a ``git worktree add`` killed half-way leaves in a repository, and its repair.

A runner killed outright (``kill -9``, a pod's kill, the OOM killer) takes the git it
was running with it. ``git worktree add`` writes, microseconds apart: the worktree's
record in the repository (``<common>/worktrees/<id>/``: ``locked``, ``gitdir``), the
worktree directory and its ``.git`` file, the record's ``commondir`` and a
placeholder ``HEAD``, then the branch, then the checkout. Killed in between, it leaves
(each seen in a loop of killed adds, ``tests/daemon/test_workspace.py``):

- a record without a ``commondir`` or ``gitdir`` (or an empty one): every later
  ``git worktree add`` in the repository fails reading it, whatever its task;
- the task's worktree directory with no record git can read behind its ``.git``
  file: git will not add a worktree where a directory that is not empty exists;
- the lock of the task's new branch (``refs/heads/<branch>.lock``): git will not
  make the branch.

A record git can read may still be unfinished: its ``HEAD`` the placeholder, or its
checkout cut short (files missing, which a run would commit as deletions). git keeps
such a record locked, its reason ``initializing``, until the add is done
(``unfinished``); ``workspace._remove_half_made`` removes that worktree and makes it
afresh. A leftover older than ``STALE_AFTER`` is dead: an
add in flight writes them within milliseconds of each other. A younger one may be
another runner's add at work, so it is left, and the run waits to try again. A
directory holding more than its ``.git`` file is moved aside, never deleted: whatever
is in it stays for whoever looks.

Every file read here is one the worker can write (its worktree's ``.git``, the
repository's records): they are read as ``files.read_workers`` reads, never trusted.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lane_runner import files

log = logging.getLogger(__name__)

#: git's records are a line or two; more is not a record git wrote.
MAX_RECORD_BYTES = 4096
#: Seconds after which a leftover of an add is taken for dead.
STALE_AFTER = 10.0
GITDIR = "gitdir: "
#: The reason git locks a worktree's record with while it adds it.
INITIALIZING = "initializing"


@dataclass
class Leftovers:
    """What an interrupted add left that is in the way of the next one."""

    records: list[Path] = field(default_factory=list)
    """Records in ``<common>/worktrees`` git cannot read."""
    lock: Path | None = None
    """The lock file of the task's branch."""
    directory: Path | None = None
    """The task's worktree directory, git having no record of it."""

    def young(self, now: float) -> list[Path]:
        """The leftovers an add in flight may still be writing (pure but for ``stat``)."""
        found = [*self.records, *([self.lock] if self.lock else [])]
        return [path for path in found if now - _newest(path) < STALE_AFTER]


def find(common: Path, worktree: Path, branch: str) -> Leftovers:
    """The leftovers in the way of adding ``worktree`` on ``branch`` to the repository
    whose git common directory is ``common``."""
    records = common / "worktrees"
    lock = common / "refs" / "heads" / f"{branch}.lock"
    return Leftovers(
        records=[r for r in _children(records) if not _readable(r)],
        lock=lock if lock.is_file() else None,
        directory=worktree if worktree.is_dir() and not _recorded(worktree) else None,
    )


def repair(found: Leftovers) -> list[str]:
    """Remove the leftovers (a directory with work in it is moved aside); what was done."""
    done: list[str] = []
    for record in found.records:
        shutil.rmtree(record)
        done.append(f"removed the unreadable worktree record {record}")
    if found.lock is not None:
        found.lock.unlink(missing_ok=True)
        done.append(f"removed the stale branch lock {found.lock}")
    if found.directory is not None:
        done.append(_clear(found.directory))
    for line in done:
        log.warning("after an interrupted git worktree add: %s", line)
    return done


def _clear(directory: Path) -> str:
    dot_git = directory / ".git"
    only_git_file = not dot_git.is_dir() or dot_git.is_symlink()
    if only_git_file and {entry.name for entry in directory.iterdir()} <= {".git"}:
        (directory / ".git").unlink(missing_ok=True)
        directory.rmdir()
        return f"removed {directory}, which held only its .git file"
    aside = directory.with_name(f"{directory.name}.unusable-{time.time_ns()}")
    directory.rename(aside)
    return f"moved {directory}, which git has no record of, aside to {aside}"


def unfinished(worktree: Path) -> bool:
    """Whether ``worktree``'s add never finished: git still holds its record locked with
    the reason it gives while adding (``initializing``; our git runs in the C locale)."""
    record = _record_of(worktree)
    if record is None:
        return False
    return _text(record / "locked") == INITIALIZING


def _children(directory: Path) -> Iterator[Path]:
    try:
        yield from (entry for entry in directory.iterdir() if entry.is_dir())
    except FileNotFoundError:
        return


def _readable(record: Path) -> bool:
    """Whether git can read a worktree record: a ``commondir`` and a ``gitdir``, not empty."""
    return all(_has_text(record / name) for name in ("commondir", "gitdir"))


def _recorded(worktree: Path) -> bool:
    """Whether ``worktree``'s ``.git`` file names a record git can read."""
    record = _record_of(worktree)
    return record is not None and record.is_dir() and _readable(record)


def _record_of(worktree: Path) -> Path | None:
    """The record ``worktree``'s ``.git`` file names; None without such a file."""
    text = _text(worktree / ".git")
    return Path(text[len(GITDIR):].strip()) if text.startswith(GITDIR) else None


def _has_text(path: Path) -> bool:
    return bool(_text(path))


def _text(path: Path) -> str:
    """What git wrote at ``path`` (a line naming a path, a lock's reason), stripped; empty
    when there is no such regular file. The worker can write every one of these files
    and the runner may be root: a link is not followed, a FIFO not waited on, and no
    more than ``MAX_RECORD_BYTES`` is read (``files.read_workers``)."""
    try:
        data = files.read_workers(path, MAX_RECORD_BYTES)
    except OSError:  # absent, not a regular file, or behind a link: no record git can use
        return ""
    return data[:MAX_RECORD_BYTES].decode(errors="replace").strip()


def _newest(path: Path) -> float:
    """The latest change in ``path`` (a file, or a directory and its files)."""
    times = [path.stat().st_mtime]
    if path.is_dir():
        times += [os.stat(entry).st_mtime for entry in path.iterdir()]
    return max(times)
