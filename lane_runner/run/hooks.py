"""The operator's hooks around a task's worktree (config ``hooks``, per board).

``after_create`` (a new worktree), ``before_run`` (before the run's first attempt),
``after_run`` (its attempts over, before the result is committed), ``after_done``
(the board took the result, e.g. ``gh pr create``) and ``before_remove`` (cleanup is
about to remove the worktree). Each is one ``sh -c`` command run in the worktree as
the worker user, under its timeout, with what it needs to know in its environment
(``LANE_*``: values stripped of control characters and bounded, never spliced into
the command itself). A failing ``after_create`` or ``before_run`` fails the attempt
(a counted failure); the others are logged and commented, and change nothing else.

Under ``isolation = sandbox`` a hook runs in a sandbox like the task's attempts
(``providers/sandbox.py``): the worktree and its git directory, the system, an empty
home, and the network only through the egress proxy to ``egress_allow``'s hosts. Code
the task planted in its worktree (a Makefile, a git hook the hook's ``git`` runs) then
reaches no more than the task itself could.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lane_runner import config
from lane_runner.config import HOOK_NAMES, HOOK_TIMEOUT, Config
from lane_runner.providers.egress import Destination
from lane_runner.providers.environment import plain_environment
from lane_runner.providers.sandbox import Request, SandboxRefused, Started, sandboxed
from lane_runner.router.route import bounded
from lane_runner.run import command
from lane_runner.run.command import home_of
from lane_runner.run.delivery import printable

log = logging.getLogger(__name__)
#: The hooks whose failure fails the attempt: the worktree is not fit to work in.
FATAL = frozenset({"after_create", "before_run"})
MAX_SUMMARY_CHARS = 8000
MAX_VALUE_CHARS = 1000
OUTPUT_TAIL_BYTES = 2000
#: Every board without an entry of its own takes this one's hooks.
EVERY_BOARD = "*"


@dataclass(frozen=True)
class Facts:
    """What a hook is told about its task (``environment``)."""

    board: str
    task_id: str
    title: str
    branch: str
    worktree: Path
    run_id: int | None = None
    commit: str | None = None
    summary: str = ""
    delivery_id: str = ""
    """``after_done``'s key for the accepted result (``run/followup.py``); else empty."""

    def environment(self, hook: str) -> dict[str, str]:
        """``LANE_*`` variables: control characters (newlines and tabs kept in the summary)
        written as ``\\xNN``, each value bounded. Quote them in the command ("$LANE_SUMMARY")."""
        return {
            "LANE_HOOK": hook,
            "LANE_BOARD": self.board,
            "LANE_TASK_ID": self.task_id,
            "LANE_TASK_TITLE": bounded(self.title, MAX_VALUE_CHARS),
            "LANE_RUN_ID": "" if self.run_id is None else str(self.run_id),
            "LANE_BRANCH": self.branch,
            "LANE_COMMIT": self.commit or "",
            "LANE_SUMMARY": printable(self.summary, MAX_SUMMARY_CHARS),
            "LANE_WORKTREE": str(self.worktree),
            "LANE_DELIVERY_ID": self.delivery_id,
        }


@dataclass(frozen=True)
class Ran:
    """A hook that ran: whether it succeeded, how it ended, the end of its output."""

    hook: str
    ok: bool
    ended: str
    output: str

    @property
    def fatal(self) -> bool:
        """A failure that fails the attempt (``FATAL``)."""
        return not self.ok and self.hook in FATAL

    def describe(self) -> str:
        """For the board and the log: which hook, how it ended, the end of its output."""
        said = f"; it said: {self.output}" if self.output else ""
        return f"the {self.hook} hook {self.ended}{said}"


def configured(hooks: Mapping[str, Mapping[str, Any]], board: str) -> Mapping[str, Any]:
    """The board's hooks: its own entry, else the ``"*"`` entry, else none."""
    return hooks.get(board, hooks.get(EVERY_BOARD, {}))


def egress(cfg: Config) -> tuple[Destination, ...] | None:
    """What a hook's sandbox may reach under ``cfg``, or None: hooks run as they are."""
    return config.egress_destinations(cfg) if config.sandboxed(cfg) else None


def run(
    hooks: Mapping[str, Mapping[str, Any]],
    hook: str,
    facts: Facts,
    *,
    owner: str | None = None,
    passes: Sequence[str] = (),
    egress: Sequence[Destination] | None = None,
) -> Ran | None:
    """Run the board's ``hook`` in the task's worktree; None when none is configured.
    ``egress`` (``egress(cfg)``): in a sandbox reaching those hosts; None: as it is."""
    assert hook in HOOK_NAMES, hook
    entry = configured(hooks, facts.board)
    script = entry.get(hook)
    if not script:
        return None
    timeout = float(entry.get("timeout", HOOK_TIMEOUT))
    env = plain_environment(home_of(owner), facts.environment(hook), passes=passes)
    with tempfile.TemporaryFile() as output:
        try:
            result = run_script(script, facts.worktree, env, owner, egress, timeout, output)
            ok = result.returncode == 0
            ended = "succeeded" if ok else f"failed with exit status {result.returncode}"
        except command.Timeout as late:
            ok, ended = False, f"was killed: it {late}"
        except (OSError, SandboxRefused) as error:  # no worktree, no /bin/sh, no sandbox
            ok, ended = False, f"could not start: {error}"
        said = _tail(output)
    ran = Ran(hook, ok, ended, said)
    log.log(
        logging.INFO if ok else logging.WARNING,
        "%s/%s: %s",
        facts.board,
        facts.task_id,
        ran.describe(),
    )
    return ran


def run_script(
    script: str, worktree: Path, env: dict[str, str], owner: str | None,
    egress: Sequence[Destination] | None, timeout: float, output: IO[bytes],
) -> subprocess.CompletedProcess[str]:
    """``script`` by ``/bin/sh`` in the task's worktree, as ``owner``, in a sandbox of the
    task's (``egress`` given) else as it is, its output into ``output``: a hook and an
    acceptance check run alike. ``command.Timeout``/``Cancelled`` and ``SandboxRefused``
    are the caller's."""
    argv = ["/bin/sh", "-c", script]
    with contextlib.ExitStack() as stack:
        started = Started(argv, env, owner)
        if egress is not None:
            started = stack.enter_context(sandboxed(Request(
                argv=argv, env=env, cwd=worktree, worktree=worktree,
                executable=Path(argv[0]), run_as=owner, allow=egress)))
        return command.run(started.argv, cwd=worktree, env=started.env, timeout=timeout,
                           owner=started.run_as, output=output)


def _tail(output: IO[bytes]) -> str:
    """The last bytes the hook wrote, as one escaped line."""
    output.seek(0, os.SEEK_END)
    output.seek(max(0, output.tell() - OUTPUT_TAIL_BYTES))
    return bounded(output.read().decode("utf-8", "replace"), OUTPUT_TAIL_BYTES)
