"""The git worktree a task works in, and the handoff one provider leaves another.

Each task gets ``worktrees/<board>/<task>`` on branch ``lane/<board>/<task>``,
created once under a lock (git's worktree metadata is shared by every worktree
of a repository) and reused when the task resumes.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from filelock import FileLock

from lane_runner.errors import LaneRunnerError

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


class WorkspaceError(LaneRunnerError):
    """The task has no usable git workspace; the message says how to give it one."""


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", **GIT_ENV},
        check=False,
    )


def branch_name(board: str, task_id: str) -> str:
    """``lane/<board>/<task>``, or a hashed form when git would refuse that name."""
    name = f"lane/{board}/{task_id}"
    if _git("check-ref-format", "--branch", name, cwd=Path("/")).returncode == 0:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"lane/{board.strip('.-') or 'board'}/task-{digest}"


def _toplevel(path: Path) -> Path | None:
    result = _git("rev-parse", "--show-toplevel", cwd=path)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def prepare(repository: str | None, worktree: Path, branch: str, lock: Path) -> Path:
    """The task's worktree, created on first use and reused after."""
    if not repository:
        raise WorkspaceError(
            "the task has no workspace: file it with --workspace PATH (a git repository)"
        )
    source = Path(repository)
    if not source.is_dir():
        raise WorkspaceError(f"workspace {repository} does not exist or is not a directory")
    top = _toplevel(source)
    if top is None:
        raise WorkspaceError(
            f"workspace {repository} is not a git repository: run 'git init' there and commit once"
        )
    if worktree.is_dir() and _toplevel(worktree) == worktree.resolve():
        return worktree
    worktree.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with FileLock(lock):
        _git("worktree", "prune", cwd=top)
        exists = _git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=top)
        if exists.returncode == 0:
            result = _git("worktree", "add", str(worktree), branch, cwd=top)
        else:
            result = _git("worktree", "add", "-b", branch, str(worktree), cwd=top)
    if result.returncode != 0:
        raise WorkspaceError(
            f"cannot create a worktree of {top}: {result.stderr.strip()} "
            "(the repository needs at least one commit)"
        )
    return worktree


def handoff(worktree: Path, prior_output: str, tail_chars: int = 4000) -> str:
    """What the next provider needs to carry on another's work: status, diff, output tail."""
    status = _git("status", "--short", cwd=worktree).stdout.strip() or "(clean)"
    diff = _git("diff", "--stat", "HEAD", cwd=worktree).stdout.strip() or "(no changes)"
    tail = prior_output[-tail_chars:].strip() or "(no output)"
    return (
        "Another agent worked on this task before you and stopped. Carry its work on.\n\n"
        f"git status:\n{status}\n\ndiff summary:\n{diff}\n\n"
        f"end of its output:\n{tail}\n"
    )
