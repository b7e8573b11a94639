"""Publishing a task's branch once the board took its result (config ``push = "on_done"``).

What is pushed is exactly the commit the board names as the result's head (``git push
REMOTE <sha>:refs/heads/<branch>``), not whatever the local branch holds by the time
the push runs (a push the cleanup sweep runs late, after someone moved the branch on),
and the comment names that commit.

The push runs as the worker user, with that user's git configuration and
credentials (its HOME, plus what ``worker_env`` passes: an SSH agent, a proxy). It
never forces: the refspec has no ``+`` and no ``--force`` is given, so a remote
branch that moved on refuses it. A transient failure (the network, the remote's 5xx)
is tried again a few times; any failure is only reported, the result stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lane_runner.run import git

log = logging.getLogger(__name__)
TRIES = 3
#: Seconds before the second and third try.
BACKOFF = (2.0, 8.0)
MAX_SAID_CHARS = 1000
#: What git says when the remote may answer on another try (lower case).
TRANSIENT = (
    "could not resolve host",
    "connection timed out",
    "connection refused",
    "failed to connect",
    "couldn't connect to server",
    "connection reset",
    "operation timed out",
    "network is unreachable",
    "temporary failure",
    "early eof",
    "the remote end hung up unexpectedly",
    "rpc failed",
    "returned error: 5",
    "the requested url returned error: 429",
    "did not finish within",
)


@dataclass(frozen=True)
class Pushed:
    """How the push went: whether the remote took the branch, after how many tries, and
    git's last words."""

    ok: bool
    tries: int
    said: str

    def describe(self, remote: str, branch: str, commit: str | None) -> str:
        """The board comment that says what happened."""
        at = f" at {commit[:12]}" if commit else ""
        if self.ok:
            return f"pushed branch {branch}{at} to {remote}"
        tries = f" after {self.tries} tries" if self.tries > 1 else ""
        return (
            f"push of branch {branch}{at} to {remote} failed{tries}: {self.said}; "
            "the result stands: push it by hand, or fix the remote and retry the push"
        )


def transient(said: str) -> bool:
    """Whether git's words say the remote may take the push on another try."""
    lowered = said.lower()
    return any(marker in lowered for marker in TRANSIENT)


def push(
    worktree: Path,
    remote: str,
    branch: str,
    commit: str,
    *,
    owner: str | None = None,
    env: Mapping[str, str] | None = None,
    wait: Callable[[float], bool],
) -> Pushed:
    """Push ``commit`` to ``branch`` on ``remote``, never forcing. ``wait(seconds)`` pauses
    between tries; True from it (the runner is stopping) ends the tries."""
    refspec = f"{commit}:refs/heads/{branch}"
    tries = 0
    while True:
        tries += 1
        result = git.run("push", "--porcelain", "--", remote, refspec,
                         cwd=worktree, owner=owner, env=env)
        said = _said(result.stderr or result.stdout, result.returncode)
        if result.returncode == 0:
            return Pushed(True, tries, said)
        if tries >= TRIES or not transient(said):
            return Pushed(False, tries, said)
        log.info("push of %s to %s failed (%s); trying again", branch, remote, said)
        if wait(BACKOFF[tries - 1]):
            return Pushed(False, tries, f"{said} (not tried again: the runner is stopping)")


def _said(text: str, status: int) -> str:
    """git's words on one line, bounded."""
    said = " ".join(text.split()) or f"exit status {status}"
    return said[:MAX_SAID_CHARS]
