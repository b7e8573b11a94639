"""What a test's daemon does that no runner would, loaded by Python at start-up from
``PYTHONPATH`` (``tests.harness.hold_commit``, ``tests.harness.with_repository_hooks``).

- ``HOLD_VARIABLE`` (``held`` and ``release`` paths and where, a line each): the
  runner's first result commit (``commit``: once it is on the branch; ``staging``: once
  the worktree is staged, before the commit is made) touches ``held`` and waits for
  ``release`` before the runner goes on, so the test can kill the daemon there. The
  repository's post-commit or post-index-change hook did this before issue 47; the
  runner's git runs no hook now.
- ``HOOKS_VARIABLE``: the runner's git runs the repository's hooks again, for tests of
  what bounds a git command (a hook is the simplest git child that holds it).
- ``COUNT_VARIABLE`` (a path): every git command the runner runs appends a line to that
  file, its subcommand and the folder it ran in, so a test can count git calls per task
  (``tests/daemon/test_git_budget.py``); the command itself runs as before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

HOLD_VARIABLE = "LANE_TEST_HOLD_COMMIT"
HOOKS_VARIABLE = "LANE_TEST_REPOSITORY_HOOKS"
COUNT_VARIABLE = "LANE_TEST_COUNT_GIT"


def _install(held: Path, release: Path, at: str) -> None:
    from lane_runner.run import delivery, snapshot

    owner, name = (delivery, "commit") if at == "commit" else (snapshot, "stage")
    original = getattr(owner, name)

    def holding(*args: object, **kwargs: object) -> object:
        made = original(*args, **kwargs)
        if not held.exists():
            held.touch()
            while not release.exists():
                time.sleep(0.05)
        return made

    setattr(owner, name, holding)


def hooks_on() -> None:
    """The runner's git without its ``core.hooksPath=/dev/null``."""
    from lane_runner.run import git

    pairs = zip(git.NEUTRAL[1::2], git.NEUTRAL[2::2], strict=True)
    kept = [part for pair in pairs if not pair[1].startswith("core.hooksPath=") for part in pair]
    git.NEUTRAL = (git.NEUTRAL[0], *kept)  # type: ignore[misc]


def count_git(tally: Path) -> None:
    """Each call of the runner's ``git.run`` appends its subcommand and folder to ``tally``
    (one ``write`` of one line, so threads' lines never interleave)."""
    from lane_runner.run import git

    original = git.run

    def counted(*args: str, cwd: Path, **kwargs: object) -> object:
        line = f"{' '.join(args)}\t{cwd}\n".encode()
        descriptor = os.open(tally, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)
        return original(*args, cwd=cwd, **kwargs)  # type: ignore[arg-type]

    git.run = counted  # type: ignore[assignment]


if os.environ.get(COUNT_VARIABLE):
    count_git(Path(os.environ[COUNT_VARIABLE]))
if os.environ.get(HOOKS_VARIABLE):
    hooks_on()
if os.environ.get(HOLD_VARIABLE):
    _held, _release, _at = os.environ[HOLD_VARIABLE].splitlines()
    _install(Path(_held), Path(_release), _at)
