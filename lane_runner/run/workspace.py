"""The git worktree a task works in, and the handoff one provider leaves another.

Each task gets ``worktrees/<board>/<task>`` on branch ``lane/<board>/<task>``,
created once under a lock (git's worktree metadata is shared by every worktree
of a repository) and reused when the task resumes.

With a worker user (``owner``) the worktree is that user's: git runs as it, so the
CLI can edit and commit there, and the daemon never runs git where another user
controls the configuration (git's own ``safe.directory`` concern).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import subprocess
import threading
from pathlib import Path

from lane_runner.errors import LaneRunnerError
from lane_runner.providers import user_ids

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
#: One ``git worktree add`` at a time: the runner's threads share each repository's
#: worktree metadata. Other runner processes are kept out of the home by its lock.
_ONE_THREAD_AT_A_TIME = threading.Lock()


class WorkspaceError(LaneRunnerError):
    """The task has no usable git workspace; the message says how to give it one."""


def _git(*args: str, cwd: Path, owner: str | None = None) -> subprocess.CompletedProcess[str]:
    """git as the daemon, or as ``owner`` with that user's HOME (its git config)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **GIT_ENV}
    if owner is not None:
        env["HOME"] = pwd.getpwnam(owner).pw_dir
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        **user_ids(owner),
    )


def branch_name(board: str, task_id: str) -> str:
    """``lane/<board>/<task>``, or a hashed form when git would refuse that name."""
    name = f"lane/{board}/{task_id}"
    if git_accepts(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"lane/{board.strip('.-') or 'board'}/task-{digest}"


def git_accepts(name: str) -> bool:
    """git's branch-name rules, for names built from board and task ids.

    Those ids hold only ``[A-Za-z0-9_.-]``, so of ``git check-ref-format``'s rules
    only the ones about dots can bite (a test holds this against git itself).
    """
    parts_ok = all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/")
    )
    return parts_ok and ".." not in name and not name.endswith(".")


def _toplevel(path: Path, owner: str | None) -> Path | None:
    result = _git("rev-parse", "--show-toplevel", cwd=path, owner=owner)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def prepare(repository: str | None, worktree: Path, branch: str, owner: str | None = None) -> Path:
    """The task's worktree, created on first use and reused after.

    The fresh path is one ``git worktree add``: what is wrong with a workspace is
    only worked out once that fails, so a healthy task pays for no checks.
    """
    if worktree.is_dir() and _toplevel(worktree, owner) == worktree.resolve():
        return worktree
    if not repository:
        raise WorkspaceError(
            "the task has no workspace: file it with --workspace PATH (a git repository)"
        )
    source = Path(repository)
    if not source.is_dir():
        raise WorkspaceError(f"workspace {repository} does not exist or is not a directory")
    worktree.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if owner is not None:
        entry = pwd.getpwnam(owner)
        os.chown(worktree.parent, entry.pw_uid, entry.pw_gid)
    with _ONE_THREAD_AT_A_TIME:
        result = _add(source, worktree, branch, owner)
        if result.returncode == 0:
            return worktree
        top = _toplevel(source, owner)
        if top is not None:
            # A worktree deleted by hand is still registered (and holds its branch).
            _git("worktree", "prune", cwd=top, owner=owner)
            result = _add(top, worktree, branch, owner)
    if result.returncode == 0:
        return worktree
    if top is None:
        raise WorkspaceError(
            f"workspace {repository} is not a git repository: run 'git init' there and commit once"
        )
    raise WorkspaceError(
        f"cannot create a worktree of {top}: {result.stderr.strip()} "
        "(the repository needs at least one commit)"
    )


def _add(
    source: Path, worktree: Path, branch: str, owner: str | None
) -> subprocess.CompletedProcess[str]:
    """``git worktree add`` on a new branch, or on the task's existing one (a resume)."""
    path = str(worktree.absolute())
    result = _git("worktree", "add", "-b", branch, path, cwd=source, owner=owner)
    if result.returncode != 0 and "a branch named" in result.stderr:
        result = _git("worktree", "add", path, branch, cwd=source, owner=owner)
    return result


def handoff(
    worktree: Path,
    prior_output: str,
    branch: str,
    owner: str | None = None,
    tail_chars: int = 4000,
) -> str:
    """What the next provider needs to carry on another's work: branch, status, diff, tail.

    The previous agent's claims are only its words, so the next one is told to
    check them against the worktree before building on them.
    """
    status = _git("status", "--short", cwd=worktree, owner=owner).stdout.strip() or "(clean)"
    diff = _git("diff", "--stat", "HEAD", cwd=worktree, owner=owner).stdout.strip()
    diff = diff or "(no changes)"
    tail = prior_output[-tail_chars:].strip() or "(no output)"
    return (
        "Another agent worked on this task before you and stopped. Carry its work on, "
        f"on branch {branch} in this worktree.\n"
        "Reinspect the workspace and verify every claim it made (edits, tests, commits) "
        "before relying on it.\n\n"
        f"git status:\n{status}\n\ndiff summary:\n{diff}\n\n"
        f"end of its output:\n{tail}\n"
    )


def artifacts(worktree: Path, claimed: list[str]) -> list[str]:
    """The claimed artifacts that are regular files inside the worktree, relative to it.

    A worker may name anything; only what really exists in its own worktree is
    kept, so a result never points a reader at a missing file or at one outside
    the task (through ``..``, an absolute path or a symbolic link).
    """
    root = worktree.resolve()
    kept: list[str] = []
    for value in claimed:
        candidate = Path(value.strip())
        if not value.strip():
            continue
        try:
            resolved = (root / candidate).resolve(strict=True)
            inside = resolved.relative_to(root)
        except (OSError, RuntimeError, ValueError):
            continue  # missing, a link loop, or outside the worktree: not an artifact
        if resolved.is_file() and inside.as_posix() not in kept:
            kept.append(inside.as_posix())
    return kept
