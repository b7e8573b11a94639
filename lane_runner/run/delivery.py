"""The accepted result as git: a commit on the task's branch (docs/ARCHITECTURE.md §6).

Before a result goes to the journal, whatever the worker left uncommitted in the
worktree is committed on the task's branch, with the task's title and the worker's
summary as the message and trailers naming the task, run, provider and model. The
commit is made exactly once: its trailers let a later run find it again after a
crash (``find``) instead of making a second one. A worker that committed by itself
is respected: its commits are the result, and the runner adds one only for what is
left. Nothing to commit is a valid result too.

What reviewers see of it (``Delivered``: branch, commits, diff stat) goes into the
result's metadata, and so into the board's completed event.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lane_runner.errors import LaneRunnerError
from lane_runner.router.route import bounded
from lane_runner.run import git

TASK_TRAILER = "Lane-Task"
RUN_TRAILER = "Lane-Run"
MAX_TITLE_CHARS = 200
MAX_SUMMARY_CHARS = 16_000
#: Commits of the branch looked through for the run's own, when its base is unknown.
SEARCH_DEPTH = 200
MAX_COMMITS_LISTED = 100
MAX_DIFFSTAT_CHARS = 4000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SHORTSTAT = re.compile(r"(\d+) (file|insertion|deletion)")


class DeliveryError(LaneRunnerError):
    """git would not take the result (a worktree mid-merge, a read-only repository)."""


@dataclass(frozen=True)
class Author:
    """Who the runner's commits are by (config ``commit_author``: ``Name <email>``)."""

    name: str
    email: str

    @classmethod
    def of(cls, identity: str) -> Author:
        """The author ``commit_author`` names (config has checked its ``Name <email>`` form)."""
        name, _, email = identity.rpartition(" <")
        return cls(name, email.removesuffix(">"))

    def environment(self) -> dict[str, str]:
        """git's identity variables: they win over any user.name in the worker's config."""
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }


@dataclass(frozen=True)
class Facts:
    """What the commit says: whose result it is and how it was reached."""

    board: str
    task_id: str
    run_id: int
    title: str
    summary: str
    provider: str
    model: str

    def trailers(self) -> list[tuple[str, str]]:
        """The commit's trailers, in order. A cost trailer joins them once the usage
        ledger exists; ``find`` reads only the task and the run."""
        return [
            (TASK_TRAILER, f"{self.board}/{self.task_id}"),
            (RUN_TRAILER, str(self.run_id)),
            ("Lane-Provider", self.provider),
            ("Lane-Model", self.model),
        ]

    def message(self) -> str:
        """Title, summary, trailers; control characters escaped, each part bounded."""
        title = bounded(self.title, MAX_TITLE_CHARS) or f"task {self.task_id}"
        summary = printable(self.summary.strip(), MAX_SUMMARY_CHARS)
        trailers = "\n".join(f"{key}: {bounded(value)}" for key, value in self.trailers())
        return f"{title}\n\n{summary}\n\n{trailers}\n"


@dataclass(frozen=True)
class Delivered:
    """The branch as the result left it, for reviewers and for the board's event."""

    branch: str
    base: str | None
    head: str | None
    commit: str | None
    """The runner's own commit; None when the worker committed everything or nothing changed."""
    commits: tuple[str, ...]
    """Every commit on the branch since ``base``, oldest first (at most ``MAX_COMMITS_LISTED``)."""
    diffstat: str
    files_changed: int = 0
    insertions: int = 0
    deletions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "base": self.base,
            "head": self.head,
            "commit": self.commit,
            "commits": list(self.commits),
            "diffstat": self.diffstat,
            "files_changed": self.files_changed,
            "insertions": self.insertions,
            "deletions": self.deletions,
        }


def deliver(
    worktree: Path,
    branch: str,
    base: str | None,
    facts: Facts,
    author: Author,
    owner: str | None = None,
) -> Delivered:
    """The result as a commit on ``branch``: found again when a crash came after it was
    made (its trailers name the task and run), else made now from whatever the worktree
    holds uncommitted (none when it holds nothing)."""
    made = find(worktree, base, facts.board, facts.task_id, facts.run_id, owner)
    if made is None:
        made = commit(worktree, facts.message(), author, owner)
    return describe(worktree, branch, base, made, owner)


def head(worktree: Path, owner: str | None = None) -> str | None:
    """The commit checked out in ``worktree``; None in a repository without one."""
    said = git.run("rev-parse", "--verify", "--quiet", "HEAD", cwd=worktree, owner=owner)
    if said.returncode != 0:
        return None
    return said.stdout.strip() or None


def find(
    worktree: Path, base: str | None, board: str, task_id: str, run_id: int, owner: str | None
) -> str | None:
    """The commit on the branch since ``base`` whose trailers name this task and run."""
    wanted = {TASK_TRAILER: f"{board}/{task_id}", RUN_TRAILER: str(run_id)}
    for sha, body in _log(worktree, base, owner):
        trailers = _trailers(body)
        if all(trailers.get(key) == value for key, value in wanted.items()):
            return sha
    return None


def commit(worktree: Path, message: str, author: Author, owner: str | None) -> str | None:
    """Commit everything the worktree holds uncommitted; the new commit, or None when there
    is nothing to commit. The repository's own pre-commit and commit-msg hooks are not run:
    the result is accepted already, and the operator's checks belong in lane hooks."""
    _checked(git.run("add", "--all", cwd=worktree, owner=owner), "add the worktree's changes")
    staged = git.run("diff", "--cached", "--quiet", cwd=worktree, owner=owner)
    if staged.returncode == 0:
        return None
    if staged.returncode != 1:
        _checked(staged, "see what is staged")
    made = git.run(
        "commit", "--no-verify", "--quiet", "--file=-",
        cwd=worktree, owner=owner, env=author.environment(), stdin=message,
    )
    _checked(made, "commit the result")
    return head(worktree, owner)


def describe(
    worktree: Path, branch: str, base: str | None, made: str | None, owner: str | None = None
) -> Delivered:
    """What the branch holds since ``base``: its commits and the diff stat of them all."""
    tip = head(worktree, owner)
    if base is None or tip is None or base == tip:
        return Delivered(branch, base, tip, made, (), "")
    listed = git.run(
        "rev-list", "--reverse", f"--max-count={MAX_COMMITS_LISTED}", f"{base}..{tip}",
        cwd=worktree, owner=owner,
    )
    stat = git.run("diff", "--stat=100", f"{base}..{tip}", cwd=worktree, owner=owner)
    diffstat = stat.stdout.rstrip() if stat.returncode == 0 else ""
    counts = _shortstat(diffstat.splitlines()[-1] if diffstat else "")
    if len(diffstat) > MAX_DIFFSTAT_CHARS:
        diffstat = diffstat[:MAX_DIFFSTAT_CHARS] + "\n[diff stat cut]"
    return Delivered(
        branch, base, tip, made, tuple(listed.stdout.split()), diffstat,
        counts.get("file", 0), counts.get("insertion", 0), counts.get("deletion", 0),
    )


def commit_log(worktree: Path, base: str | None, owner: str | None = None) -> str:
    """The branch's commits since ``base``, one line each, for the next turn's handoff."""
    if base is None:
        return ""
    said = git.run(
        "log", "--oneline", f"--max-count={MAX_COMMITS_LISTED}", f"{base}..HEAD",
        cwd=worktree, owner=owner,
    )
    return said.stdout.strip() if said.returncode == 0 else ""


def _log(worktree: Path, base: str | None, owner: str | None) -> list[tuple[str, str]]:
    """(sha, message) of the branch's commits since ``base``, newest first."""
    span = [f"{base}..HEAD"] if base else [f"--max-count={SEARCH_DEPTH}", "HEAD"]
    said = git.run("log", "--format=%H%x1f%B%x1e", *span, cwd=worktree, owner=owner)
    if said.returncode != 0:
        return []
    found = []
    for record in said.stdout.split("\x1e"):
        sha, _, body = record.strip("\n").partition("\x1f")
        if sha:
            found.append((sha, body))
    return found


def _trailers(body: str) -> Mapping[str, str]:
    """The ``Key: value`` lines of a message's last paragraph."""
    paragraphs = [p for p in body.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return {}
    trailers = {}
    for line in paragraphs[-1].splitlines():
        key, separator, value = line.partition(": ")
        if separator:
            trailers[key.strip()] = value.strip()
    return trailers


def _shortstat(line: str) -> dict[str, int]:
    """``3 files changed, 10 insertions(+), 2 deletions(-)`` as counts by kind."""
    return {kind: int(number) for number, kind in _SHORTSTAT.findall(line)}


def printable(text: str, limit: int) -> str:
    """``text`` with control characters other than newline and tab written as ``\\xNN``
    (a commit message or a hook's variable is read in terminals), cut at ``limit``."""
    shown = _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return shown if len(shown) <= limit else shown[:limit] + "\n[cut]"


def _checked(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
        raise DeliveryError(f"git could not {what}: {said}")
