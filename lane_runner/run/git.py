"""git as the runner runs it: as the daemon, or as the worker user with that user's HOME.

With a worker user, every git command in a task's worktree runs as that user (its
git configuration and credentials, never root's where the worker controls the
repository: git's own ``safe.directory`` concern). Each runs under a deadline
(``run/command.py``); a git that hangs is reported as git's failure, in git's words,
and one the shutdown ends raises ``command.Cancelled``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from lane_runner.run import command

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
#: git's automatic maintenance (gc) detaches from the call that starts it, and whatever
#: a runner's git call leaves running is ended with it (``run/command.py``): it is never
#: started, so nothing is cut half-way. The repository's owner maintains it as before.
NO_AUTO_MAINTENANCE = ("-c", "maintenance.auto=false", "-c", "gc.auto=0")
#: Seconds any one git command may take; a worktree add of a large repository fits.
GIT_TIMEOUT = 300.0
PATH = "/usr/local/bin:/usr/bin:/bin"


def environment(owner: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """git's environment: a plain PATH, no prompts, the C locale, ``owner``'s HOME."""
    env = {"PATH": PATH, **GIT_ENV}
    home = command.home_of(owner)
    if home is not None:
        env["HOME"] = str(home)
    env.update(extra or {})
    return env


def run(
    *args: str,
    cwd: Path,
    owner: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = GIT_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """``git ARGS``; a git killed at its deadline is a failure saying so on stderr.

    ``env`` adds to git's environment (an identity, an operator's ``worker_env``).
    """
    argv = ["git", *NO_AUTO_MAINTENANCE, *args]
    try:
        return command.run(
            argv, cwd=cwd, env=environment(owner, env), timeout=timeout, owner=owner, stdin=stdin
        )
    except command.Timeout as late:
        said = f"{late.stderr}\ngit {' '.join(args)} {late}"
        return subprocess.CompletedProcess(argv, -9, late.stdout, said)
