"""The simulated CLIs the runner installs in its home, reachable by a worker user."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from lane_runner.providers.simulators import install


def test_a_worker_user_reaches_the_simulators_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o077)  # the systemd unit's UMask=
    try:
        installed = install(tmp_path / "sim-bin")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "sim-bin").stat().st_mode) == 0o755
    assert {stat.S_IMODE(path.stat().st_mode) for path in installed.values()} == {0o755}


def test_each_simulated_run_records_its_working_directory(tmp_path: Path) -> None:
    """The crash campaign (bench/campaign) counts a task's CLI runs by the worktree each
    ran in: ``LANE_RUNNER_SIM_STARTED_LOG`` holds one line per run, with its directory."""
    installed = install(tmp_path / "sim-bin")
    started = tmp_path / "started.jsonl"
    worktrees = [tmp_path / name for name in ("t-1", "t-2")]
    for worktree in worktrees:
        worktree.mkdir()
        subprocess.run(
            [str(installed["codex"]), "exec", "--json", "-"], input="a task", text=True,
            cwd=worktree, capture_output=True, check=True, timeout=60,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                 "LANE_RUNNER_SIM_STARTED_LOG": str(started)},
        )
    lines = [json.loads(line) for line in started.read_text().splitlines()]
    assert [line["cwd"] for line in lines] == [str(path) for path in worktrees]
