"""One daemon or recover per home, with a message naming the holder; kill -9 frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lane_runner.service.lock import HomeLock, HomeLocked, holder

HOLD = """
import sys, time
from pathlib import Path
from lane_runner.service.lock import HomeLock
with HomeLock(Path(sys.argv[1]), "daemon"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def held(tmp_path: Path):
    path = tmp_path / "runner.lock"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    yield path, process
    process.kill()
    process.wait()


def test_a_second_holder_is_refused_with_the_holders_pid(held) -> None:
    path, process = held
    with pytest.raises(HomeLocked, match=rf"daemon, pid {process.pid}"), HomeLock(path, "recover"):
        pass
    current = holder(path)
    assert current is not None and current.pid == process.pid and current.command == "daemon"


def test_kill_9_of_the_holder_frees_the_home(held) -> None:
    path, process = held
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while holder(path) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert holder(path) is None
    with HomeLock(path, "recover"):
        assert holder(path) is None or holder(path).pid == os.getpid()  # type: ignore[union-attr]


def test_nobody_holds_a_fresh_home(tmp_path: Path) -> None:
    assert holder(tmp_path / "runner.lock") is None


PROBE = """
import sys
from pathlib import Path
from lane_runner.service.lock import holder
path = Path(sys.argv[1])
print("probing", flush=True)
while True:
    holder(path)
"""


def test_a_status_probe_never_makes_a_starting_daemon_give_up(tmp_path: Path) -> None:
    """``lane-runner status`` probes the lock by taking it for an instant: a daemon that
    starts in that instant (a systemd restart while a monitor polls status) must wait for
    the probe, not report another lane-runner and exit."""
    path = tmp_path / "runner.lock"
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert probe.stdout is not None and probe.stdout.readline().strip() == "probing"
        for _ in range(300):
            with HomeLock(path, "daemon"):
                pass
    finally:
        probe.kill()
        probe.wait()
