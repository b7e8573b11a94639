"""Publishing a task's branch once the board took its result (config ``push = "on_done"``).

What is pushed is exactly the commit the board names as the result's head (``git push
REMOTE <sha>:refs/heads/<branch>``), and the comment names that commit. Before it, the
local branch is read again (``moved``): when it no longer names that commit (another
task, or a person, moved it after the board recorded the head; a push the cleanup sweep
runs late) nothing is pushed, and the comment names both commits. Which of them the
remote should get is a person's call (issue 47).

The push runs as the worker user, with that user's git configuration and
credentials (its HOME, plus what ``worker_env`` passes: an SSH agent, a proxy). The
repository's configuration is every task's to write, so what the push would execute
from it is taken from the worker's own global configuration instead (``transport``):
its SSH command, askpass and credential helpers; no pre-push or other hook, no
receive-pack of a local remote's choosing, no submodule pushes, no ``git://`` proxy
(``git://`` is refused) and no ``ext::`` (``run/git.py``). It
never forces: the refspec has no ``+`` and no ``--force`` is given, so a remote
branch that moved on refuses it. A transient failure (the network, the remote's 5xx)
is tried again a few times; any failure is only reported, the result stands.
"""

from __future__ import annotations

import logging
import shlex
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


#: The worker's own settings the push's transport takes (``transport``), lower case.
TRANSPORT_KEYS = ("core.sshcommand", "core.askpass", "credential.helper")


def moved(worktree: Path, branch: str, commit: str, owner: str | None) -> str | None:
    """Why the push is refused when the local ``branch`` no longer names ``commit`` (the
    head the board recorded for the result); None when it does."""
    said = git.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
                   cwd=worktree, owner=owner)
    now = said.stdout.strip() if said.returncode == 0 else ""
    if now == commit:
        return None
    where = f"is at {now}" if now else "is gone"
    return (
        f"branch {branch} {where}, but the board recorded {commit} as the task's result: "
        "the branch was moved after the board took the result, so neither is pushed"
    )


def transport(worktree: Path, owner: str | None, env: Mapping[str, str] | None) -> list[str]:
    """``-c`` options that give the push's transport the worker's own global settings
    (its ``~/.gitconfig``, read as that user) over whatever the repository says, and
    switch off what else the repository could make a push run."""
    said = git.run("config", "--global", "--includes", "--get-regexp",
                   "^(core\\.sshcommand|core\\.askpass|credential\\.helper)$",
                   cwd=worktree, owner=owner, env=env, worker_config=True)
    found: dict[str, list[str]] = {key: [] for key in TRANSPORT_KEYS}
    for line in said.stdout.splitlines() if said.returncode == 0 else []:
        key, _, value = line.partition(" ")
        found.setdefault(key.lower(), []).append(value)
    ssh = found["core.sshcommand"][-1:] or [shlex.quote((env or {}).get("GIT_SSH", "ssh"))]
    options = [
        f"core.sshCommand={ssh[0]}",
        f"core.askPass={(found['core.askpass'][-1:] or [''])[0]}",
        "credential.helper=",  # an empty value drops every helper named before it
        *(f"credential.helper={helper}" for helper in found["credential.helper"]),
        "push.recurseSubmodules=no",
        "protocol.git.allow=never",
    ]
    return [part for option in options for part in ("-c", option)]


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
    between tries; True from it (the runner is stopping) ends the tries. Nothing is pushed
    when the local branch no longer names ``commit`` (``moved``)."""
    refused = moved(worktree, branch, commit, owner)
    if refused is not None:
        log.warning("push of %s refused: %s", branch, refused)
        return Pushed(False, 0, refused)
    refspec = f"{commit}:refs/heads/{branch}"
    pinned = transport(worktree, owner, env)
    tries = 0
    while True:
        tries += 1
        # --receive-pack on the command line: a remote's configured receivepack is taken
        # first come (a -c could not outrank the repository's).
        result = git.run(*pinned, "push", "--porcelain", "--receive-pack=git-receive-pack",
                         "--", remote, refspec, cwd=worktree, owner=owner, env=env,
                         worker_config=True)
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
