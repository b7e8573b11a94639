"""The lock files a killed git leaves behind, taken away before the result's commit.

git guards the index and each ref with a ``.lock`` file it creates, writes through an
open descriptor, and renames or removes when it ends. A git killed in between (its
runner killed -9 with it, the OOM killer) leaves the file, and every later ``git add``
or ``git commit`` in that worktree refuses: "Unable to create '…/index.lock': File
exists". The crash campaign met it: a run that took over a worktree whose last git had
been killed blocked its accepted result ``capability`` instead of committing it.

A lock is stale when no process holds it open: a live git keeps its lock's descriptor
until it is done with it. Only the two locks the result's commit takes are looked at
(the worktree's index, the task branch's ref), only inside the repository's own git
directory, and only regular files (a worker may plant anything in a worktree).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from lane_runner.run import git

log = logging.getLogger(__name__)


def clear_stale(
    worktree: Path, branch: str, owner: str | None = None,
    dirs: tuple[Path, Path] | None = None,
) -> list[Path]:
    """Remove the stale index and branch-ref locks of ``worktree``; the paths removed.
    ``dirs``: its git directory and the repository's common one, when the caller read
    them (``snapshot.place``); else they are asked of git."""
    found = _git_dirs(worktree, owner) if dirs is None else _checked_dirs(worktree, *dirs)
    if found is None:
        return []
    git_dir, common = found
    removed = []
    for lock in (git_dir / "index.lock", common / "refs" / "heads" / f"{branch}.lock"):
        if _stale(lock):
            try:
                lock.unlink()
            except FileNotFoundError:
                continue  # its git ended meanwhile and took it away: the goal is reached
            log.warning("%s: removed %s, which a killed git left behind (no process holds "
                        "it)", worktree, lock)
            removed.append(lock)
    return removed


def _git_dirs(worktree: Path, owner: str | None) -> tuple[Path, Path] | None:
    """(the worktree's git directory, the repository's common one), when the first is the
    common one or one of its ``worktrees/`` entries; else None (nothing is touched)."""
    said = git.run("rev-parse", "--absolute-git-dir", "--git-common-dir", cwd=worktree,
                   owner=owner)
    lines = said.stdout.splitlines()
    if said.returncode != 0 or len(lines) != 2:
        return None
    return _checked_dirs(worktree, Path(os.path.realpath(lines[0])),
                         Path(os.path.realpath(worktree / lines[1])))


def _checked_dirs(worktree: Path, git_dir: Path, common: Path) -> tuple[Path, Path] | None:
    if git_dir != common and git_dir.parent != common / "worktrees":
        log.warning("%s: its git directory %s is not the repository's (%s): its locks are "
                    "left alone", worktree, git_dir, common)
        return None
    return git_dir, common


def _stale(lock: Path) -> bool:
    try:
        info = lock.lstat()
    except OSError:
        return False  # no lock (the usual case), or one we cannot look at: leave it
    return stat.S_ISREG(info.st_mode) and not held(lock, info.st_uid)


def held(path: Path, owner_uid: int, proc: Path = Path("/proc")) -> bool:
    """Whether a process may have ``path`` open: one this process sees holding it, or
    one of ``owner_uid`` (who made the lock) whose descriptors it may not look at."""
    wanted = os.fsencode(path)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            descriptors = list((entry / "fd").iterdir())
        except PermissionError:
            if _uid(entry) == owner_uid:
                return True  # it may hold it, and we cannot tell: the lock stays
            continue
        except OSError:
            continue  # gone meanwhile
        for descriptor in descriptors:
            try:
                if os.fsencode(os.readlink(descriptor)) == wanted:
                    return True
            except OSError:
                continue  # closed meanwhile
    return False


def _uid(process: Path) -> int | None:
    try:
        return process.stat().st_uid
    except OSError:
        return None
