"""What removing a worktree would lose, and the worktrees cleanup keeps for it.

Cleanup (``run/cleanup.py``) never removes the last reference to a commit or an
uncommitted change, whatever the task's age: a worktree that holds anything HEAD does not
(untracked files too; ignored ones are not work: ``run/snapshot.py``, which runs none of
the repository's filters, where ``git status`` would), or whose HEAD reaches
commits that no branch, tag or other ref reaches (a worker or a hook that committed
on a detached HEAD), is kept in place, however long ago ``retention_days`` ran out.
Removing it would leave those commits to ``git gc`` and the changes to nobody.

Keeping the worktree (rather than saving its work under a ref and removing it) leaves
the decision, and the files exactly as they were, to a person: the worktrees kept past
``retention_days`` are written to ``kept-worktrees.json`` in the home at the end of each
sweep, named by ``lane-runner cleanup`` and warned about by ``doctor``, each with why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from lane_runner import files
from lane_runner.home import Home
from lane_runner.run import git, snapshot, taskgit
from lane_runner.run.branchhead import where

MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Kept:
    """A done task's worktree kept past ``retention_days``: removing it would lose ``why``."""

    task: str
    """``board/task``."""
    worktree: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "worktree": self.worktree, "why": self.why}


def would_lose(worktree: Path, owner: str | None = None) -> str | None:
    """What removing ``worktree`` would lose, in words; None when nothing (or why it could not
    be told, which keeps it too)."""
    try:
        changed = snapshot.changes(worktree, owner)
    except snapshot.StagingError as error:
        return f"its changes could not be told: {error}"
    if changed:
        return f"it holds uncommitted changes ({len(changed)} path(s))"
    return _commits_only_head_reaches(worktree, owner)


def _commits_only_head_reaches(worktree: Path, owner: str | None) -> str | None:
    """The commits HEAD reaches that no ref of the repository does, in words; None when
    there are none. A task's clone (``run/taskgit.py``) goes with its own refs, so only
    its repository's count there."""
    head = git.run("rev-parse", "--verify", "--quiet", "HEAD", cwd=worktree, owner=owner)
    if head.returncode != 0:
        return None  # an unborn HEAD reaches no commit
    kept_by = taskgit.repository_of(worktree) if taskgit.is_clone(worktree) else worktree
    if kept_by is None:
        return ("which commits only its HEAD reaches cannot be told (its git directory no "
                "longer names its repository)")
    refs = git.run("for-each-ref", "--format=%(objectname)", cwd=kept_by, owner=owner)
    # Each ref given on stdin as ^ref: a --not before --stdin does not reach stdin's lines.
    excluded = "".join(f"^{sha}\n" for sha in refs.stdout.split())
    counted = git.run("rev-list", "--count", "HEAD", "--stdin",
                      cwd=worktree, owner=owner, stdin=excluded)
    if refs.returncode != 0 or counted.returncode != 0:
        said = (refs.stderr if refs.returncode else counted.stderr).strip()
        return f"git could not tell which commits only its HEAD reaches: {said}"
    only = int(counted.stdout.strip() or 0)
    if not only:
        return None
    return (f"HEAD ({where(worktree, owner).describe()}) reaches {only} commit(s) "
            "no branch or other ref does")


def path(home: Home) -> Path:
    return home.root / "kept-worktrees.json"


def record(home: Home, kept: list[Kept]) -> None:
    """The worktrees the latest complete sweep kept past ``retention_days``, for ``doctor``;
    written only when that changed (a sweep runs every ``gc_interval``)."""
    if recorded(home) != kept:
        files.write(path(home), orjson.dumps([entry.to_dict() for entry in kept]))


def recorded(home: Home) -> list[Kept]:
    """What ``record`` wrote last; none before a first sweep. A file that cannot be read
    says so as one entry, so ``doctor`` does not pass over it."""
    try:
        document = orjson.loads(files.read(path(home), MAX_BYTES))
        return [Kept(str(e["task"]), str(e["worktree"]), str(e["why"])) for e in document]
    except FileNotFoundError:
        return []
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as error:
        return [Kept("?", str(path(home)), f"unreadable ({error}); the next sweep rewrites it")]
