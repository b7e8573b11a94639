"""The shipped unit file passes systemd-analyze verify and says what
docs/ARCHITECTURE.md §6 asks, with the CLIs as a worker user of their own."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEMD = Path(__file__).parents[2] / "systemd"
UNIT = SYSTEMD / "lane-runner.service"


def settings(text: str) -> dict[str, list[str]]:
    """Each ``Key=value`` line of a unit, by key (a key may repeat)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def test_unit_declares_notify_watchdog_recover_and_the_stop_budget() -> None:
    unit = settings(UNIT.read_text())
    assert unit["Type"] == ["notify"] and unit["WatchdogSec"] and unit["TimeoutStopSec"] == ["90"]
    assert unit["Restart"] == ["on-failure"] and unit["StateDirectory"] == ["lane-runner"]
    assert unit["ExecStartPre"] == ["-/usr/local/bin/lane-runner recover"]


def test_the_clis_run_as_a_worker_user_the_sysusers_snippet_creates() -> None:
    unit = settings(UNIT.read_text())
    assert "LANE_RUNNER_WORKER_USER=lane-worker" in unit["Environment"]
    assert "User" not in unit  # root, bounded: it hands each CLI to lane-worker
    assert set(unit["CapabilityBoundingSet"][0].split()) == {
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL", "CAP_SETUID", "CAP_SETGID"
    }
    assert unit["NoNewPrivileges"] == ["yes"] and unit["StateDirectoryMode"] == ["0711"]
    sysusers = (SYSTEMD / "lane-runner.sysusers.conf").read_text().splitlines()
    (worker,) = [line.split() for line in sysusers if line.startswith("u ")]
    assert worker[1] == "lane-worker" and "/var/lib/lane-worker" in worker
    tmpfiles = (SYSTEMD / "lane-runner.tmpfiles.conf").read_text()
    assert "d /var/lib/lane-worker            0700 lane-worker lane-worker -" in tmpfiles


def test_the_workers_home_is_writable_and_secrets_come_from_a_file() -> None:
    unit = settings(UNIT.read_text())
    assert unit["ProtectSystem"] == ["strict"]
    assert "/var/lib/lane-worker" in unit["ReadWritePaths"]
    assert unit["EnvironmentFile"] == ["-/etc/lane-runner/lane-runner.env"]


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


@pytest.mark.skipif(
    shutil.which("systemd-sysusers") is None or shutil.which("systemd-tmpfiles") is None,
    reason="systemd-sysusers / systemd-tmpfiles not installed",
)
@pytest.mark.skipif(os.geteuid() != 0, reason="systemd-tmpfiles --root chowns: needs root")
def test_sysusers_and_tmpfiles_make_the_worker_and_the_homes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    for tool, snippet in (
        ("systemd-sysusers", "lane-runner.sysusers.conf"),
        ("systemd-tmpfiles", "lane-runner.tmpfiles.conf"),
    ):
        flags = ["--create"] if tool == "systemd-tmpfiles" else []
        done = subprocess.run(
            [tool, f"--root={root}", *flags, str(SYSTEMD / snippet)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    (entry,) = [line.split(":") for line in (root / "etc" / "passwd").read_text().splitlines()]
    assert entry[0] == "lane-worker" and entry[5:] == ["/var/lib/lane-worker", "/usr/sbin/nologin"]
    worker_home = (root / "var/lib/lane-worker").stat()
    assert worker_home.st_uid == int(entry[2]) and stat.S_IMODE(worker_home.st_mode) == 0o700
    runner_home = (root / "var/lib/lane-runner").stat()
    assert runner_home.st_uid == 0 and stat.S_IMODE(runner_home.st_mode) == 0o711
