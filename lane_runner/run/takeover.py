"""An earlier run's worktree holding the task's branch, taken over by the run now due.

A runner that died (or another home on the same repository) leaves the task's worktree,
its uncommitted work and commits not yet on the repository's branch in it. The run that
claims the task next moves that worktree to its own place instead of blocking the task,
unless the run that made it is still current (``still_current``: it waits then). The
run working in a worktree is recorded beside it (``mark``), in the home, never inside it.

Two kinds are found: a clone of the task's own (``run/taskgit.py``), which the
repository's registry names, moved by ``taskgit.move``; and a linked worktree an older
runner made (``git worktree add``: the repository's git directory shared), which ``git
worktree list`` names and ``git worktree move`` moves (``linked``). Such a worktree keeps
working as it is until its task ends; cleanup removes it with ``git worktree remove``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from lane_runner import files
from lane_runner.errors import LaneRunnerError
from lane_runner.run import git

log = logging.getLogger(__name__)
MARKER_BYTES = 64

#: Whether a run of this board is still current (claimed, not ended).
RunIsCurrent = Callable[[int], bool]


def still_current(holder: Path, run: int | None, is_current: RunIsCurrent | None) -> int | None:
    """The run that made the worktree at ``holder`` when it is another run, still
    current; None when it may be taken (no run recorded it, or it is this run's own)."""
    previous = marked_run(holder)
    if previous is None or previous == run or is_current is None:
        return None
    return previous if is_current(previous) else None


def linked_holder(top: Path, branch: str, owner: str | None) -> Path | None:
    """The linked worktree (an older runner's) that has ``branch`` checked out, if one has."""
    listing = git.run("worktree", "list", "--porcelain", cwd=top, owner=owner)
    for block in listing.stdout.split("\n\n"):
        lines = block.splitlines()
        if f"branch refs/heads/{branch}" in lines and lines[0].startswith("worktree "):
            return Path(lines[0].removeprefix("worktree "))
    return None


class CannotTakeOver(LaneRunnerError):
    """The earlier worktree can be neither moved nor removed; the words say git's."""


def linked(top: Path, holder: Path, worktree: Path, branch: str, owner: str | None) -> bool:
    """Move the linked worktree at ``holder`` to ``worktree``, its uncommitted work with it
    (True). When git cannot move it (a locked worktree, submodules, another file system)
    it is removed (False), so that the task's branch is free for a clone of its own: its
    commits are kept (they are the repository's), its uncommitted changes are not, and
    the log says so. CannotTakeOver when it cannot be removed either."""
    with contextlib.suppress(FileNotFoundError):
        worktree.rmdir()  # an empty leftover directory; git would move *into* it
    moved = git.run("worktree", "move", str(holder), str(worktree.absolute()), cwd=top,
                    owner=owner)
    if moved.returncode == 0:
        log.info("took over %s (branch %s) as %s", holder, branch, worktree)
        return True
    removed = git.run("worktree", "remove", "--force", str(holder), cwd=top, owner=owner)
    if removed.returncode != 0:
        raise CannotTakeOver(
            f"cannot take over the worktree at {holder} that holds branch {branch}: "
            f"git said: {moved.stderr.strip()}; {removed.stderr.strip()}"
        )
    log.warning(
        "could not move %s (%s); removed it and checked %s out afresh: its uncommitted "
        "changes are gone, its commits kept", holder, moved.stderr.strip(), branch,
    )
    return False


def marker(worktree: Path) -> Path:
    """Beside the worktree, in the home (never inside it, where git status would show it)."""
    return worktree.parent / f".{worktree.name}.run"


def mark(worktree: Path, run: int | None) -> None:
    """Record which run works in ``worktree``, for a runner that later finds it holding the branch.

    With a worker user the directory is that user's: the marker is replaced by rename,
    so a link or FIFO planted at its name is never followed or waited on (``files``).
    """
    if run is None:
        return
    files.write(marker(worktree), f"{run}\n".encode(), mode=files.SHARED_FILE)


def marked_run(worktree: Path) -> int | None:
    """The run recorded beside ``worktree``; None for a worktree no run recorded (stale)."""
    try:
        return int(files.read(marker(worktree), MARKER_BYTES)[:MARKER_BYTES].strip())
    except (OSError, ValueError):
        return None
