"""A ``status.json`` that cannot be written stops neither the loop nor the watchdog."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lane_runner.board.model import Status
from lane_runner.service import status
from tests.harness import Lane


def test_a_publisher_that_cannot_write_says_so_and_does_not_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    publisher = status.Publisher(tmp_path / "gone" / "status.json", interval=0.0)
    assert publisher.publish({"n": 1}, now=1.0) is False
    assert publisher.publish({"n": 2}, now=2.0) is False
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "cannot publish" in warnings[0].getMessage()


def _immutable(path: Path, on: bool) -> bool:
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    flag = "+i" if on else "-i"
    return subprocess.run([chattr, flag, str(path)], capture_output=True).returncode == 0


def test_the_daemon_serves_while_its_home_refuses_status_json(lane: Lane) -> None:
    daemon = lane.start()
    first = lane.add("before", body="do it")  # makes every directory a task needs
    lane.wait(lambda: lane.board.get_task(first.id).status is Status.DONE, what="a first task")
    if not _immutable(lane.root, True):
        pytest.skip("chattr +i is not available here (needs root on ext4/xfs/btrfs)")
    try:
        task = lane.add("t", body="do it")
        lane.wait(lambda: lane.board.get_task(task.id).status is Status.DONE, what="the task")
        lane.wait(
            lambda: "cannot publish" in (lane.root / "daemon.log").read_text(),
            what="the warning",
        )
    finally:
        _immutable(lane.root, False)
    log = (lane.root / "daemon.log").read_text()
    assert "daemon loop iteration failed" not in log
    assert log.count("cannot publish") == 1
    daemon.terminate()
    assert daemon.wait(timeout=60) == 0
