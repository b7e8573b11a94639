"""Acceptance checks: the commands a completed answer must pass before it is accepted
(config ``checks``, a task's ``--check``; docs/verification.md).

Each is one ``sh -c`` command run in the task's worktree as the worker user, bounded
as a hook is (``run/command.py``: the whole process tree, the ``check_timeout``
deadline, output to a file and only its tail kept) and, under ``isolation = sandbox``,
in the sandbox a hook gets (``run/hooks.py``): the code the checks run is the task's
own, and reaches no more than the task could. Every check runs, so the implementer is
told of every failure at once; each one's command, exit code, duration and output tail
is evidence on the result.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from lane_runner.providers.egress import Destination
from lane_runner.providers.environment import plain_environment
from lane_runner.providers.sandbox import SandboxRefused
from lane_runner.run import command
from lane_runner.run.command import home_of
from lane_runner.run.hooks import Facts, run_script
from lane_runner.run.verification import CheckRun

log = logging.getLogger(__name__)
#: How much of a check's output is kept (its end: where a test runner says what failed).
OUTPUT_TAIL_BYTES = 8000


def run_all(
    commands: Sequence[str],
    facts: Facts,
    *,
    timeout: float,
    owner: str | None = None,
    passes: Sequence[str] = (),
    egress: Sequence[Destination] | None = None,
) -> tuple[CheckRun, ...]:
    """Every check in order, each to its end or its deadline."""
    return tuple(
        run_one(script, facts, timeout=timeout, owner=owner, passes=passes, egress=egress)
        for script in commands
    )


def run_one(
    script: str,
    facts: Facts,
    *,
    timeout: float,
    owner: str | None = None,
    passes: Sequence[str] = (),
    egress: Sequence[Destination] | None = None,
) -> CheckRun:
    """One check; ``command.Cancelled`` (the shutdown) is the caller's: the check runs
    again on the next start, as nothing of it was saved."""
    env = plain_environment(home_of(owner), facts.environment("check"), passes=passes)
    began = time.monotonic()
    exit_code: int | None = None
    with tempfile.TemporaryFile() as output:
        try:
            result = run_script(script, facts.worktree, env, owner, egress, timeout, output)
            exit_code = result.returncode
            ended = "passed" if exit_code == 0 else f"failed with exit status {exit_code}"
        except command.Timeout as late:
            ended = f"was killed: it {late}"
        except (OSError, SandboxRefused) as error:  # no worktree, no /bin/sh, no sandbox
            ended = f"could not start: {error}"
        said = tail(output)
    ran = CheckRun(script, exit_code, ended, time.monotonic() - began, said)
    log.log(logging.INFO if ran.passed else logging.WARNING, "%s/%s: check `%s` %s",
            facts.board, facts.task_id, script, ended)
    return ran


def tail(output: IO[bytes], size: int = OUTPUT_TAIL_BYTES) -> str:
    """The last ``size`` bytes the command wrote, as text (cut at a line start when one
    is near, so the first line read is whole)."""
    output.seek(0, os.SEEK_END)
    end = output.tell()
    output.seek(max(0, end - size))
    text = output.read().decode("utf-8", "replace")
    if end > size and "\n" in text[:200]:
        text = text[text.index("\n") + 1:]
    return text


def facts_for(board: str, task_id: str, title: str, branch: str, worktree: Path,
              run_id: int) -> Facts:
    """What a check is told of its task (``LANE_*``, as a hook is; ``LANE_HOOK=check``)."""
    return Facts(board=board, task_id=task_id, title=title, branch=branch,
                 worktree=worktree, run_id=run_id)
