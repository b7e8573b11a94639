"""The git worktree a task works in, and the handoff one provider leaves another.

Each task gets ``worktrees/<board>/<task>`` on branch ``lane/<board>/<task>``,
created once under a lock (git's worktree metadata is shared by every worktree
of a repository) and reused when the task resumes.

With a worker user (``owner``) the worktree is that user's: git runs as it, so the
CLI can edit and commit there, and the daemon never runs git where another user
controls the configuration (git's own ``safe.directory`` concern).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pwd
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lane_runner import files
from lane_runner.errors import LaneRunnerError
from lane_runner.providers import user_ids

log = logging.getLogger(__name__)
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
MARKER_BYTES = 64
#: Seconds any one git command may take; a worktree add of a large repository fits.
GIT_TIMEOUT = 300.0
DUBIOUS_OWNERSHIP = "detected dubious ownership"
#: One ``git worktree add`` at a time: the runner's threads share each repository's
#: worktree metadata. Other runner processes are kept out of the home by its lock.
_ONE_THREAD_AT_A_TIME = threading.Lock()


class WorkspaceError(LaneRunnerError):
    """The task has no usable git workspace; the message says how to give it one."""


def _git(*args: str, cwd: Path, owner: str | None = None) -> subprocess.CompletedProcess[str]:
    """git as the daemon, or as ``owner`` with that user's HOME (its git config).

    In its own session, with a deadline: a git that hangs (a hook, a lock, a network
    filesystem) is killed with everything it started, and reported as git's failure.
    """
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **GIT_ENV}
    if owner is not None:
        env["HOME"] = pwd.getpwnam(owner).pw_dir
    argv = ["git", *args]
    with subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        **user_ids(owner),
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
                os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            stderr += f"\ngit {' '.join(args)} did not finish within {GIT_TIMEOUT:g} s: killed"
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


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


def _not_a_repository(source: Path, owner: str | None) -> WorkspaceError:
    """Why git will not treat ``source`` as a repository, in git's words, with the fix.

    "Dubious ownership" (the repository belongs to another user than the one git runs
    as, typically the worker user) is not a missing repository: ``git init`` there
    would be the wrong advice.
    """
    said = _git("rev-parse", "--show-toplevel", cwd=source, owner=owner).stderr.strip()
    if DUBIOUS_OWNERSHIP in said:
        user = owner or pwd.getpwuid(os.geteuid()).pw_name
        first = said.splitlines()[0].removeprefix("fatal: ")
        return WorkspaceError(
            f"git refuses workspace {source} when run as {user}: {first}. Give it to that "
            f"user (chown -R {user} {source}) or let that user trust it "
            f"(as {user}: git config --global --add safe.directory {source})"
        )
    if "not a git repository" in said.lower() or not said:
        return WorkspaceError(
            f"workspace {source} is not a git repository: run 'git init' there and commit once"
        )
    return WorkspaceError(f"workspace {source} cannot be used: git said: {said}")


@dataclass(frozen=True)
class Workspace:
    """The task's worktree, and the worktree of an earlier run it was taken over from."""

    path: Path
    taken_over_from: Path | None = None


class WorkspaceBusy(WorkspaceError):
    """The task's branch is held by the worktree of a run that is still current.

    Not the task's fault and not this run's to take: the run waits and tries again.
    """


#: Whether a run of this board is still current (claimed, not ended).
RunIsCurrent = Callable[[int], bool]


def prepare(
    repository: str | None,
    worktree: Path,
    branch: str,
    owner: str | None = None,
    *,
    run: int | None = None,
    is_current: RunIsCurrent | None = None,
) -> Workspace:
    """The task's worktree, created on first use and reused after.

    The fresh path is one ``git worktree add``: what is wrong with a workspace is
    only worked out once that fails, so a healthy task pays for no checks. When
    the branch is held by another worktree (a runner that died, or another home
    on the same repository), run ``run`` takes that worktree over, unless the run
    that made it is still current (``is_current``): see ``_take_over``.
    """
    if worktree.is_dir() and _toplevel(worktree, owner) == worktree.resolve():
        _mark(worktree, run)
        return Workspace(worktree)
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
        prepared = _create(source, worktree, branch, owner, run, is_current)
    _mark(worktree, run)
    return prepared


def check_source(source: Path, owner: str | None = None) -> None:
    """What a run would meet, checked when the task is filed (``task add``, ``task edit``):
    ``source`` is a directory, a git repository with a commit, that git run as ``owner``
    (the worker user, when given) can read. WorkspaceError quotes git's own words.
    """
    if not source.is_dir():
        raise WorkspaceError(f"workspace {source} does not exist or is not a directory")
    said = _git("rev-parse", "--show-toplevel", cwd=source, owner=owner)
    if said.returncode != 0:
        if DUBIOUS_OWNERSHIP in said.stderr:
            raise _not_a_repository(source, owner)
        words = said.stderr.strip() or f"exit status {said.returncode}"
        raise WorkspaceError(
            f"workspace {source} cannot be used{_as(owner)}: git said: {words}"
            + (" (run 'git init' there and commit once)" if "not a git repository" in words else "")
        )
    head = _git("log", "-1", "--format=%H", cwd=source, owner=owner)
    if head.returncode != 0:
        words = head.stderr.strip() or f"exit status {head.returncode}"
        raise WorkspaceError(
            f"workspace {source} has no commit to start a worktree from: git said: {words} "
            "(commit once)"
        )


def _as(owner: str | None) -> str:
    return f" by the worker user {owner}" if owner else ""


def _create(
    source: Path,
    worktree: Path,
    branch: str,
    owner: str | None,
    run: int | None,
    is_current: RunIsCurrent | None,
) -> Workspace:
    result = _add(source, worktree, branch, owner)
    if result.returncode == 0:
        return Workspace(worktree)
    top = _toplevel(source, owner)
    if top is None:
        raise _not_a_repository(source, owner)
    # A worktree deleted by hand is still registered (and holds its branch).
    _git("worktree", "prune", cwd=top, owner=owner)
    result = _add(top, worktree, branch, owner)
    if result.returncode == 0:
        return Workspace(worktree)
    holder = _holder(top, branch, owner)
    if holder is None or holder.resolve() == worktree.resolve():
        raise _cannot_create(top, result, owner)
    previous = _marked_run(holder)
    if _still_current(previous, run, is_current):
        raise WorkspaceBusy(
            f"branch {branch} is checked out at {holder} by run {previous}, which is "
            "still current: this run waits for it to end"
        )
    return _take_over(top, holder, worktree, branch, owner)


def _still_current(previous: int | None, run: int | None, is_current: RunIsCurrent | None) -> bool:
    """Whether the run that made the holding worktree is another run, still current."""
    if previous is None or previous == run or is_current is None:
        return False  # no run recorded it (stale), or it is this run's own
    return is_current(previous)


def _add(
    source: Path, worktree: Path, branch: str, owner: str | None
) -> subprocess.CompletedProcess[str]:
    """``git worktree add`` on a new branch, or on the task's existing one (a resume)."""
    path = str(worktree.absolute())
    result = _git("worktree", "add", "-b", branch, path, cwd=source, owner=owner)
    if result.returncode != 0 and "a branch named" in result.stderr:
        result = _git("worktree", "add", path, branch, cwd=source, owner=owner)
    return result


def _cannot_create(
    top: Path, result: subprocess.CompletedProcess[str], owner: str | None
) -> WorkspaceError:
    """What git said, and the likely cause only when it is the cause."""
    has_commit = _git("rev-parse", "--verify", "--quiet", "HEAD", cwd=top, owner=owner)
    hint = "" if has_commit.returncode == 0 else " (the repository needs at least one commit)"
    said = result.stderr.strip() or result.stdout.strip() or f"exit status {result.returncode}"
    return WorkspaceError(f"cannot create a worktree of {top}: git said: {said}{hint}")


def _holder(top: Path, branch: str, owner: str | None) -> Path | None:
    """The worktree that has ``branch`` checked out, if one has."""
    listing = _git("worktree", "list", "--porcelain", cwd=top, owner=owner)
    for block in listing.stdout.split("\n\n"):
        lines = block.splitlines()
        if f"branch refs/heads/{branch}" in lines and lines[0].startswith("worktree "):
            return Path(lines[0].removeprefix("worktree "))
    return None


def _take_over(
    top: Path, holder: Path, worktree: Path, branch: str, owner: str | None
) -> Workspace:
    """Move an earlier run's worktree to this run's place, its uncommitted work with it.

    When git cannot move it (a locked worktree, submodules, another file system)
    the earlier worktree is removed and the branch checked out afresh: its
    commits are kept, its uncommitted changes are not, and the log says so.
    """
    with contextlib.suppress(FileNotFoundError):
        worktree.rmdir()  # an empty leftover directory; git would move *into* it
    moved = _git("worktree", "move", str(holder), str(worktree.absolute()), cwd=top, owner=owner)
    if moved.returncode == 0:
        log.info("took over %s (branch %s) as %s", holder, branch, worktree)
        return Workspace(worktree, taken_over_from=holder)
    removed = _git("worktree", "remove", "--force", str(holder), cwd=top, owner=owner)
    if removed.returncode != 0:
        raise WorkspaceError(
            f"cannot take over the worktree at {holder} that holds branch {branch}: "
            f"git said: {moved.stderr.strip()}; {removed.stderr.strip()}"
        )
    log.warning(
        "could not move %s (%s); removed it and checked %s out afresh: its uncommitted "
        "changes are gone, its commits kept",
        holder,
        moved.stderr.strip(),
        branch,
    )
    result = _add(top, worktree, branch, owner)
    if result.returncode != 0:
        raise _cannot_create(top, result, owner)
    return Workspace(worktree, taken_over_from=holder)


def _marker(worktree: Path) -> Path:
    """Beside the worktree, in the home (never inside it, where git status would show it)."""
    return worktree.parent / f".{worktree.name}.run"


def _mark(worktree: Path, run: int | None) -> None:
    """Record which run works in ``worktree``, for a runner that later finds it holding the branch.

    With a worker user the directory is that user's: the marker is replaced by rename,
    so a link or FIFO planted at its name is never followed or waited on (``files``).
    """
    if run is None:
        return
    files.write(_marker(worktree), f"{run}\n".encode(), mode=files.SHARED_FILE)


def _marked_run(worktree: Path) -> int | None:
    """The run recorded beside ``worktree``; None for a worktree no run recorded (stale)."""
    try:
        return int(files.read(_marker(worktree), MARKER_BYTES)[:MARKER_BYTES].strip())
    except (OSError, ValueError):
        return None


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
