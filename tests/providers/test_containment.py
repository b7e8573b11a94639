"""A descendant that double-forks, calls setsid and clears its environment is still ended.

It leaves the process tree (its parent exits at once), its session and the attempt
token behind; only cgroup membership follows it. Where the host has no writable
cgroup v2 hierarchy these tests are skipped and the fallback (tree walk and token,
tested in test_supervisor) is all there is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lane_runner.providers import cgroup
from lane_runner.providers.supervisor import Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog

pytestmark = pytest.mark.skipif(
    cgroup.parent() is None, reason="no writable cgroup v2 hierarchy on this host"
)

#: Forks a child that calls setsid and forks the escapee, which records its pid and
#: becomes ``sleep`` with an empty environment; the middle process exits at once.
ESCAPE = """
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1], "w") as out:
            out.write(str(os.getpid()))
        os.execve("/bin/sleep", ["sleep", "300"], {})
    os._exit(0)
os.wait()
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _escapee(pid_file: Path) -> int:
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the escapee never started"
        time.sleep(0.01)
    return int(pid_file.read_text())


def test_an_escaped_grandchild_dies_with_its_attempt(tmp_path: Path) -> None:
    pid_file = tmp_path / "escapee"
    log = TaskLog(tmp_path / "task.log", rotate_bytes=1 << 20)
    script = f"{sys.executable} -c '{ESCAPE}' {pid_file}; sleep 0.5; echo answer"
    try:
        ended = Supervisor(
            ["sh", "-c", script],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            stdin=b"",
            task_log=log,
            limits=Limits(deadline=time.monotonic() + 60, kill_grace=1.0),
            on_event=lambda event: True,
            heartbeat=lambda: True,
        ).run()
    finally:
        log.close()
    escapee = _escapee(pid_file)
    assert (ended.exit_status, ended.tail.strip()) == (0, "answer")
    assert not _alive(escapee)
    base = cgroup._base()
    assert base is not None and not [p for p in base.iterdir() if p.is_dir()]  # removed


def test_an_escaped_grandchild_of_a_killed_daemon_is_ended_by_the_sweep(tmp_path: Path) -> None:
    """The daemon dies with ``kill -9``: the next start (or ``recover``) sweeps its groups."""
    pid_file = tmp_path / "escapee"
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from lane_runner.providers.cgroup import AttemptGroup\n"
            "group = AttemptGroup.create('attempt')\n"
            "subprocess.Popen(group.launcher([sys.executable, '-c', sys.argv[1], sys.argv[2]]))\n"
            "time.sleep(300)\n",
            ESCAPE,
            str(pid_file),
        ]
    )
    escapee = _escapee(pid_file)
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    assert _alive(escapee)  # nothing but a sweep would ever end it
    # Its pid is in what this sweep ended, unless a daemon of a test running beside this
    # one (pytest-xdist) swept first at its start: the escapee must die either way.
    cgroup.sweep()
    deadline = time.monotonic() + 30
    while _alive(escapee):
        assert time.monotonic() < deadline, "the sweep did not end the escapee"
        time.sleep(0.01)
    above = cgroup.parent()
    assert above is not None and not list(above.glob(f"{cgroup.PREFIX}{daemon.pid}-*"))


def test_daemons_starting_together_sweep_the_same_dead_groups_without_failing() -> None:
    """Several homes on one host start at once (a reboot): their sweeps race over the
    same dead daemons' groups, and each group one of them removes must not fail another."""
    above = cgroup.parent()
    assert above is not None
    dead = [above / f"{cgroup.PREFIX}{os.getpid()}-dead{n}" for n in range(100)]  # wrong start
    for group in dead:
        (group / "attempt").mkdir(parents=True)
    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            cgroup.sweep()
        except BaseException as error:  # noqa: BLE001 - the test reports what any sweep raised
            errors.append(error)

    sweepers = [threading.Thread(target=sweep) for _ in range(4)]
    for sweeper in sweepers:
        sweeper.start()
    for sweeper in sweepers:
        sweeper.join()
    assert errors == []
    assert not [group for group in dead if group.exists()]
