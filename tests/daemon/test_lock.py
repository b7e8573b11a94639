"""One daemon or recover per home, with a message naming the holder; kill -9 frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lane_runner.board.model import Status
from lane_runner.service.lock import HomeLock, HomeLocked, holder
from tests.harness import Lane, with_repository_hooks

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


WINDOW = 20.0  # seconds of tries: past the 11 s after which the old daemon let go


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_home_stays_locked_while_a_stopping_daemon_s_git_runs(lane: Lane) -> None:
    """SIGTERM while a run's ``git worktree add`` is still busy (its post-checkout hook): the
    daemon keeps the home lock until that git is gone, so a ``recover`` cannot reclaim the
    run meanwhile; the run is handed back by the recover that follows."""
    gate, hook_pid = lane.root / "gate", lane.root / "hook.pid"
    gate.touch()
    hook = lane.repo / ".git" / "hooks" / "reference-transaction"  # the add makes the branch
    hook.write_text(
        f"#!/bin/sh\necho $$ > '{hook_pid}'\nwhile [ -e '{gate}' ]; do sleep 0.05; done\n"
    )
    hook.chmod(0o755)
    lane.extra_env.update(with_repository_hooks())  # the runner's git runs none as shipped
    task = lane.add("slow checkout")
    daemon = lane.start()
    try:
        lane.wait(hook_pid.exists, what="the worktree's git hook")
        lane.wait(lambda: hook_pid.read_text().strip() != "", what="the hook's pid")
        git_hook = int(hook_pid.read_text())
        daemon.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + WINDOW
        while time.monotonic() < deadline and daemon.poll() is None:
            recovered = lane.cli("recover")
            if recovered.returncode in (0, 3):
                assert not alive(git_hook), "recover took the home while the daemon's git ran"
            else:
                assert "holds" in recovered.stderr, recovered.stderr
    finally:
        gate.unlink()
    assert daemon.wait(timeout=60) == 0
    recovered = lane.cli("recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert lane.board.get_task(task.id).status is Status.READY
