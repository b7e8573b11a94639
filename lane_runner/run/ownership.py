"""Who owns what a task leaves beside its worktree when each running slot has its own
worker user (``worker_users``; docs/security.md, "A pool of worker users").

With one worker user the board's folder of worktrees is that user's, and every task
can rename, plant or read anything in it (issue 47, case 2). With a pool:

- the board's folder is root's, mode ``1733``: every pool user may create its task's
  entries there, none may list the folder, and none may rename or remove an entry
  another user owns (the sticky bit);
- a task's worktree is its user's, mode ``0700``, and handed over to the run's user
  when a run of the task works as another pool user (a retry, a restart);
- the CLI's result file is written in an outbox of the task's own
  (``.<task>.out/``), made by the runner, 0700 and the run's user's, for each
  attempt: a neighbour cannot create a result file there before the CLI does.

Everything here runs as the daemon (root) and never follows a link the worker made.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import stat
import time
from pathlib import Path

from journal.pin import kind_of
from lane_runner import files

log = logging.getLogger(__name__)

#: The board's folder of worktrees under a pool: root's, sticky, writable, not listable.
BOARD_FOLDER_MODE = 0o1733
#: ``worktrees/`` under a pool, as the home above it: every pool user passes through.
PASSING = 0o711
#: A task's worktree and outbox under a pool: its user's only.
TASK_MODE = 0o700


def board_folder(folder: Path) -> None:
    """Make ``folder`` (``worktrees/<board>``) the pool's shared, sticky folder."""
    files.ensure_directory(folder.parent, PASSING)
    with files.directory(folder.parent) as fd:  # worktrees/: pool users pass, never list
        if os.fstat(fd).st_uid == 0:
            os.fchmod(fd, PASSING)
    files.ensure_directory(folder)
    with files.directory(folder) as fd:
        os.fchown(fd, 0, 0)
        os.fchmod(fd, BOARD_FOLDER_MODE)


def outbox_of(worktree: Path) -> Path:
    """The task's outbox, beside its worktree (never inside, where git would see it)."""
    return worktree.parent / f".{worktree.name}.out"


def discard_outbox(worktree: Path) -> None:
    """The outbox goes with its worktree: each attempt's result file is removed as the
    attempt ends, but the folder stayed, one per task for ever. Removed by descriptors
    (``shutil.rmtree`` never follows a link in the tree); a link or file at its name is
    unlinked itself. Whatever cannot be removed is logged and left: the worktree is gone
    either way, and the next run of the task makes a fresh outbox (``outbox``)."""
    path = outbox_of(worktree)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as error:
        log.warning("the outbox %s of a removed worktree was left: %s", path, error)


def outbox(path: Path, user: str) -> None:
    """A fresh ``path`` directory, ``user``'s and 0700, for the CLI's result file:
    whatever is at that name (a neighbour's directory, a link, a file) is moved aside
    unread first, so what the CLI writes there is the CLI's own."""
    entry = pwd.getpwnam(user)
    with files.directory(path.parent) as fd:
        try:
            status = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            status = None
        if status is not None and not _owned_directory(status, entry.pw_uid):
            files.move_aside(fd, path.name, kind_of(status.st_mode), path.parent)
            status = None
        if status is None:
            os.mkdir(path.name, TASK_MODE, dir_fd=fd)
        child = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        try:
            os.fchown(child, entry.pw_uid, entry.pw_gid)
            os.fchmod(child, TASK_MODE)
        finally:
            os.close(child)


def _owned_directory(status: os.stat_result, uid: int) -> bool:
    return stat.S_ISDIR(status.st_mode) and status.st_uid in (uid, 0)


def hand_over(worktree: Path, user: str, *, fresh: bool = False) -> bool:
    """``worktree`` made ``user``'s (0700) when another user owns it; whether it was.
    The previous user's runs of the task are over (the task is this run's claim).

    ``fresh``: no run of the task prepared a worktree in this home yet, so whatever is
    at its name was planted by another pool user (the name is predictable): it is moved
    aside unread, never handed over, and the task gets a clone of its own."""
    entry = pwd.getpwnam(user)
    try:
        status = os.stat(worktree, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if fresh:
        with files.directory(worktree.parent) as fd:
            files.move_aside(fd, worktree.name, "unclaimed", worktree.parent)
        return False
    if not stat.S_ISDIR(status.st_mode):
        return False  # the workspace's own checks say what is wrong with it
    if status.st_uid != entry.pw_uid:
        began = time.monotonic()
        count = files.hand_over(worktree, entry.pw_uid, entry.pw_gid)
        log.info("worktree %s handed over from uid %d to %s (%d entries, %.3f s)",
                 worktree, status.st_uid, user, count, time.monotonic() - began)
    private(worktree)
    return status.st_uid != entry.pw_uid


def private(worktree: Path) -> None:
    """The worktree's top 0700: no other pool user can look in or write below it."""
    with files.directory(worktree) as fd:
        os.fchmod(fd, TASK_MODE)
