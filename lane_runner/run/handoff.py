"""What one provider leaves the next, and what a result may name: the handoff text a
provider that carries on another's work is given, and the artifacts an answer claims,
kept only where they really are files of the task's worktree."""

from __future__ import annotations

from pathlib import Path

from lane_runner.run import snapshot


def handoff(
    worktree: Path,
    prior_output: str,
    branch: str,
    owner: str | None = None,
    tail_chars: int = 4000,
    commits: str = "",
) -> str:
    """What the next provider needs to carry on another's work: branch, its commits so
    far (``commits``, one line each), status, diff, tail.

    The previous agent's claims are only its words, so the next one is told to
    check them against the worktree before building on them.
    """
    try:
        changed = snapshot.changes(worktree, owner)
    except snapshot.StagingError as error:
        changed = [f"(could not be told: {error})"]
    status = "\n".join(changed) or "(clean)"
    diff = snapshot.summary(changed)
    tail = prior_output[-tail_chars:].strip() or "(no output)"
    return (
        "Another agent worked on this task before you and stopped. Carry its work on, "
        f"on branch {branch} in this worktree.\n"
        "Reinspect the workspace and verify every claim it made (edits, tests, commits) "
        "before relying on it.\n\n"
        f"commits on the branch so far:\n{commits or '(none)'}\n\n"
        f"git status:\n{status}\n\ndiff summary:\n{diff}\n\n"
        f"end of its output:\n{tail}\n"
    )


def artifacts(worktree: Path, claimed: list[str], base: Path | None = None) -> list[str]:
    """The claimed artifacts that are regular files inside the worktree, relative to it.

    A worker may name anything; only what really exists in its own worktree is
    kept, so a result never points a reader at a missing file or at one outside
    the task (through ``..``, an absolute path or a symbolic link). Relative names
    are the CLI's, from ``base``, the folder it worked in (default: the worktree).
    """
    root = worktree.resolve()
    start = (base or worktree).resolve()
    kept: list[str] = []
    for value in claimed:
        candidate = Path(value.strip())
        if not value.strip():
            continue
        try:
            resolved = (start / candidate).resolve(strict=True)
            inside = resolved.relative_to(root)
        except (OSError, RuntimeError, ValueError):
            continue  # missing, a link loop, or outside the worktree: not an artifact
        if resolved.is_file() and inside.as_posix() not in kept:
            kept.append(inside.as_posix())
    return kept
