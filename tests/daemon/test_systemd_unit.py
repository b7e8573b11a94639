"""The shipped unit file passes systemd-analyze verify and says what
docs/ARCHITECTURE.md §6 asks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNIT = Path(__file__).parents[2] / "systemd" / "lane-runner.service"


def test_unit_declares_notify_watchdog_recover_and_an_unprivileged_user() -> None:
    text = UNIT.read_text()
    for line in (
        "Type=notify",
        "WatchdogSec=",
        "Restart=on-failure",
        "recover",
        "User=lane-runner",
        "StateDirectory=lane-runner",
        "TimeoutStopSec=90",
    ):
        assert line in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    executable = Path(sys.executable).with_name("lane-runner")
    if not executable.exists():
        pytest.skip("lane-runner console script not installed next to this python")
    unit = tmp_path / "lane-runner.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/lane-runner", str(executable)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
