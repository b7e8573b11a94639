"""git as the runner runs it: as the daemon, or as the worker user with that user's HOME.

With a worker user, every git command in a task's worktree runs as that user (its
git configuration and credentials, never root's where the worker controls the
repository: git's own ``safe.directory`` concern). Each runs under a deadline
(``run/command.py``); a git that hangs is reported as git's failure, in git's words,
and one the shutdown ends raises ``command.Cancelled``.

The repository is the worker's: every task of it (code running as the worker user) can
write its ``.git/config``, ``.git/hooks``, ``.git/info/attributes`` and the worker's own
``~/.gitconfig``. So the runner's git runs none of the code those files can name
(issue 47; docs/security.md, "What the runner's git never runs"):

- ``NEUTRAL`` goes on every command line. ``-c`` outranks every file git reads, so the
  repository cannot set these back: no hook (``core.hooksPath=/dev/null``: a path under
  which nothing can ever be created, so git finds no ``post-commit``,
  ``prepare-commit-msg``, ``reference-transaction``, ``post-checkout``, ``pre-push``,
  ``post-index-change``…), no fsmonitor, no pager, no signing (``gpg.program`` is never
  started: nothing signs and ``log`` shows no signature), no ``ext::`` transport, and
  paths printed C-quoted (``run/snapshot.py`` reads them back as bytes).
- The worker's global configuration is not read (``GIT_CONFIG_GLOBAL=/dev/null``) except
  by a push (``worker_config``), which needs that user's credentials and SSH settings:
  ``run/push.py`` takes its transport's commands from there, not from the repository.
  The system's ``/etc/gitconfig`` is root's and still read.
- Keys whose names the worker chooses (``filter.<driver>.clean``,
  ``diff.<driver>.textconv``) cannot be overridden one by one; the runner runs no
  command that would use them: its staging is plumbing that never converts a file
  (``run/snapshot.py``), and its diffs are tree to tree with ``--no-ext-diff
  --no-textconv`` (``DIFF``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from lane_runner.run import command

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
#: git's automatic maintenance (gc) detaches from the call that starts it, and whatever
#: a runner's git call leaves running is ended with it (``run/command.py``): it is never
#: started, so nothing is cut half-way. The repository's owner maintains it as before.
NO_AUTO_MAINTENANCE = ("-c", "maintenance.auto=false", "-c", "gc.auto=0")
#: What the repository's configuration cannot turn back on for the runner's git (above).
NEUTRAL = (
    "--no-pager",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.pager=cat",
    "-c", "core.quotePath=true",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "push.gpgSign=false",
    "-c", "log.showSignature=false",
    "-c", "protocol.ext.allow=never",
)
#: What every diff the runner asks for is given: no external diff, no textconv driver.
DIFF = ("--no-ext-diff", "--no-textconv")
#: Seconds any one git command may take; a worktree add of a large repository fits.
GIT_TIMEOUT = 300.0
PATH = "/usr/local/bin:/usr/bin:/bin"


def environment(
    owner: str | None, extra: Mapping[str, str] | None = None, *, worker_config: bool = False
) -> dict[str, str]:
    """git's environment: a plain PATH, no prompts, the C locale, ``owner``'s HOME; the
    worker's global configuration only with ``worker_config`` (a push)."""
    env = {"PATH": PATH, **GIT_ENV}
    if not worker_config:
        env["GIT_CONFIG_GLOBAL"] = os.devnull
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
    stdin: str | bytes | None = None,
    timeout: float = GIT_TIMEOUT,
    worker_config: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` with ``NEUTRAL``; a git killed at its deadline is a failure saying so on
    stderr.

    ``env`` adds to git's environment (an identity, an operator's ``worker_env``).
    """
    argv = ["git", *NEUTRAL, *NO_AUTO_MAINTENANCE, *args]
    try:
        return command.run(
            argv, cwd=cwd, env=environment(owner, env, worker_config=worker_config),
            timeout=timeout, owner=owner, stdin=stdin,
        )
    except command.Timeout as late:
        said = f"{late.stderr}\ngit {' '.join(args)} {late}"
        return subprocess.CompletedProcess(argv, -9, late.stdout, said)
