"""Where the worker left HEAD, and the result brought back to the task's branch.

A worker may run ``git checkout -b fix`` or ``git checkout --detach`` (agents do).
The result is committed where HEAD is, and the board says "branch lane/<board>/<task>,
head <sha>"; so before the result is committed (``run/delivery.py``) HEAD must be on
the task's branch again, or the commit lands somewhere the board does not name and
the branch, the push and cleanup all miss it.

- HEAD on the task's branch: nothing to do.
- HEAD elsewhere (another branch, or detached) at a commit that descends from the
  task branch's tip (the tip itself, or the worker's commits on top of it): the task's
  branch is fast-forwarded to that commit and HEAD put back on it. Nothing is lost or
  rewritten: the branch only moves forward, the worker's own branch stays where it is,
  and the worktree's files and index are untouched (the branch names the very commit
  HEAD had).
- Anything else (HEAD at a commit that is not ahead of the branch: an older commit,
  another line of history, an orphan branch with no commit): which work is the result
  is a person's call. ``HeadElsewhere`` says where HEAD is; the executor blocks the
  task ``needs_input`` with those words and keeps the accepted result for after the
  unblock.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lane_runner.run import git
from lane_runner.run.delivery import DeliveryError

log = logging.getLogger(__name__)


class HeadElsewhere(DeliveryError):
    """The worker left HEAD where the result cannot be put on the task's branch by itself."""


@dataclass(frozen=True)
class Head:
    """Where HEAD is: the branch it names (None: detached) and the commit (None: unborn)."""

    branch: str | None
    commit: str | None

    def describe(self) -> str:
        """``detached at 3f46…``, ``on branch fix at 3f46…``, ``on branch fix, with no commit``."""
        if self.branch is None:
            return f"detached at {(self.commit or '')[:12]}"
        if self.commit is None:
            return f"on branch {self.branch}, with no commit yet"
        return f"on branch {self.branch} at {self.commit[:12]}"


def refusal(head: Head, branch: str, tip: str | None, ahead: bool) -> str | None:
    """Why the result cannot be brought back to ``branch`` by itself; None when it can (HEAD
    is on it, or at a commit that descends from its tip: ``ahead``)."""
    if head.branch == branch:
        return None
    if head.commit is not None and tip is not None and ahead:
        return None
    if tip is None:
        return f"the worker left HEAD {head.describe()} and branch {branch} is gone"
    return (
        f"the worker left HEAD {head.describe()}, not on the task's branch {branch} "
        f"(at {tip[:12]}) nor ahead of it, so the result is not on that branch"
    )


def bring_back(worktree: Path, branch: str, owner: str | None = None) -> Head | None:
    """Put HEAD back on ``branch`` (see the module's rules); the Head the worker left when it
    was elsewhere, None when it was on ``branch``. ``HeadElsewhere`` when a person must say."""
    head = where(worktree, owner)
    if head.branch == branch:
        return None
    ref = f"refs/heads/{branch}"
    tip = _commit(worktree, ref, owner)
    ahead = (
        head.commit is not None and tip is not None
        and git.run("merge-base", "--is-ancestor", tip, head.commit,
                    cwd=worktree, owner=owner).returncode == 0
    )
    refused = refusal(head, branch, tip, ahead)
    if refused is not None:
        raise HeadElsewhere(refused)
    assert head.commit is not None and tip is not None
    # Compare-and-swap: the branch moves only from the tip just read.
    _checked(git.run("update-ref", "-m", "lane-runner: the result back on the task's branch",
                     ref, head.commit, tip, cwd=worktree, owner=owner), f"move {branch}")
    _checked(git.run("symbolic-ref", "HEAD", ref, cwd=worktree, owner=owner),
             f"check {branch} out again")
    log.warning("%s: the worker left HEAD %s; branch %s fast-forwarded to it and checked out",
                worktree, head.describe(), branch)
    return head


def where(worktree: Path, owner: str | None = None) -> Head:
    """The branch HEAD names (None when detached) and the commit it is at (None: unborn).

    One git call where HEAD has a commit (issue 46: a task's delivery asked twice);
    ``--symbolic-full-name`` says "HEAD" when detached. An unborn HEAD fails it, and its
    branch is asked for apart (a worker's ``checkout --orphan``)."""
    said = git.run("rev-parse", "HEAD^{commit}", "--symbolic-full-name", "HEAD",
                   cwd=worktree, owner=owner)
    found = said.stdout.split()
    if said.returncode == 0 and len(found) == 2:
        commit, name = found
        return Head(name.removeprefix("refs/heads/") if name != "HEAD" else None, commit)
    named = git.run("symbolic-ref", "--quiet", "HEAD", cwd=worktree, owner=owner)
    branch = named.stdout.strip().removeprefix("refs/heads/") if named.returncode == 0 else None
    return Head(branch or None, _commit(worktree, "HEAD", owner))


def _commit(worktree: Path, name: str, owner: str | None) -> str | None:
    said = git.run("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}",
                   cwd=worktree, owner=owner)
    return (said.stdout.strip() or None) if said.returncode == 0 else None


def _checked(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
        raise DeliveryError(f"git could not {what}: {said}")
