"""The installed ``lane-runner`` console script, run in a subprocess as a user runs it.

The day-one tests go through the script pip put beside the interpreter (the venv's
``bin/lane-runner``), not ``python -m``: what a newcomer types is what is tested.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.harness import Runner

SCRIPT = Path(sys.executable).with_name("lane-runner")


def script() -> Path:
    if not SCRIPT.is_file():
        pytest.fail(f"no console script at {SCRIPT}: install the package (pip install -e .)")
    return SCRIPT


def console(
    runner: Runner,
    *args: str,
    stdout: Any = subprocess.PIPE,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``lane-runner ARGS`` on ``runner``'s home (``LANE_RUNNER_HOME``, so ``--home`` may be
    given anywhere by the test itself)."""
    return subprocess.run(
        [str(script()), *args],
        env={**runner.environ(), "LANE_RUNNER_HOME": str(runner.root), **(env or {})},
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        cwd=runner.root,
    )


def json_of(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def closed_pipe() -> int:
    """The write end of a pipe whose reader has already gone: what ``| head`` leaves."""
    read, write = os.pipe()
    os.close(read)
    return write
