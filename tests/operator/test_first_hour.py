"""The first hour with the command line (issue 39), driven through the installed
``lane-runner`` script: a run with no CLI refuses to start, a batch says by its exit
status and ``--json`` what happened, a mistyped home or name is said to be one."""

from __future__ import annotations

import os
from pathlib import Path

from lane_runner.board.model import Status
from tests.harness import BOARD, Lane
from tests.operator.console import console

#: A PATH with the system's tools (git) and no agent CLI.
NO_CLI_PATH = "/usr/bin:/bin"


def test_a_run_without_any_cli_refuses_to_start_naming_what_to_install(lane: Lane) -> None:
    for tool in ("codex", "claude"):
        assert not any((Path(d) / tool).exists() for d in NO_CLI_PATH.split(os.pathsep))
    lane.write_config(simulate=False)
    task = lane.add("never claimed")
    done = console(lane, "run", "--until-idle", env={"PATH": NO_CLI_PATH})
    assert done.returncode == 2, done.stderr
    for named in ("codex", "claude", "codex_bin", "claude_bin", "simulate = true"):
        assert named in done.stderr, named
    assert lane.board.get_task(task.id).status is Status.READY  # nothing was claimed
    assert lane.board.runs(task.id) == []
