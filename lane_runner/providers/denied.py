"""The git commands no agent CLI may run in a workspace, whatever its sandbox.

Each destroys work that no later run and no journal can bring back: a forced push
rewrites the remote's history (another runner's pushed results with it), a hard
reset and a forced clean drop the worker's uncommitted changes before the runner
commits them. They are denied to every CLI that has a way to deny a command, each
in its own words (claude ``--disallowedTools`` and its settings' ``permissions.deny``,
codex an execpolicy rules file of ``forbidden`` prefixes); docs/security.md says what
this stops and what it does not.

A denial is a guard against an agent's habit, not a wall against an agent that
means harm: a command spelled another way (``git push origin +main``, a script that
runs ``git reset --hard``) is not matched.
"""

from __future__ import annotations

#: Command prefixes, as argv words: a command that begins with one is denied.
DENIED_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("git", "push", "--force"),
    ("git", "push", "-f"),
    ("git", "push", "--force-with-lease"),
    ("git", "reset", "--hard"),
    ("git", "clean", "-f"),
    ("git", "clean", "-fd"),
    ("git", "clean", "-fdx"),
)

#: Why, as the CLI tells its model when it refuses one.
REASON = (
    "lane-runner denies this command: it destroys work no run can restore (the runner "
    "commits the workspace's changes itself; leave history and the remote alone)"
)


def spelled(command: tuple[str, ...]) -> str:
    """``command`` as a person would type it."""
    return " ".join(command)
