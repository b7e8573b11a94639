"""The tree kill at scale: thousands of real descendants, every one ended, no pidfd kept.

A tool may leave hundreds of background processes behind and the CLI still answer
and exit 0. Each descendant is held by a pidfd, so their descriptors pass 1,024:
whatever watches them must not be ``select`` (issue 26, finding 2).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lane_runner.providers.supervisor import Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog

DESCENDANTS = 2000

#: Starts ``DESCENDANTS`` sleepers in the background, each off the CLI's pipes, writes
#: their pids, answers and exits 0: the sleepers outlive it, re-parented to the runner.
LEAVE_SLEEPERS = f"""
i=0
while [ $i -lt {DESCENDANTS} ]; do
  sleep 600 </dev/null >/dev/null 2>&1 &
  echo $! >> "$1"
  i=$((i + 1))
done
echo answer
"""


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _exists(pid: int) -> bool:
    """Alive, or a zombie nobody reaped: either is a failure of the tree kill."""
    return Path(f"/proc/{pid}").exists()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _survivors(pid_file: Path) -> list[int]:
    """The sleepers still running, ended by pid: a failing kill leaves none behind the test."""
    left = [pid for pid in map(int, pid_file.read_text().split()) if _alive(pid)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def test_two_thousand_descendants_are_all_ended_and_no_pidfd_is_kept(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    pid_file.touch()
    log = TaskLog(tmp_path / "task.log", rotate_bytes=1 << 20)
    before = _open_descriptors()
    try:
        ended = Supervisor(
            ["sh", "-c", LEAVE_SLEEPERS, "sh", str(pid_file)],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            stdin=b"",
            task_log=log,
            limits=Limits(deadline=time.monotonic() + 300, kill_grace=5.0),
            on_event=lambda event: True,
            heartbeat=lambda: True,
        ).run()
    finally:
        log.close()
        survivors = _survivors(pid_file)
    pids = [int(word) for word in pid_file.read_text().split()]
    assert len(pids) == DESCENDANTS
    assert (ended.exit_status, ended.stopped, ended.tail.strip()) == (0, None, "answer")
    assert survivors == []
    assert [pid for pid in pids if _exists(pid)] == [], "zombies left unreaped"
    assert _open_descriptors() <= before


#: A daemon whose hard descriptor limit is 64 supervises a CLI with 200 descendants in
#: its process group, until its runtime is over: most of them cannot be held by a pidfd.
LOW_LIMIT_DAEMON = """
import resource, sys, time
from pathlib import Path
from lane_runner.providers.supervisor import Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog

resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
work = Path(sys.argv[1])
script = (
    'i=0; while [ $i -lt 200 ]; do sleep 600 </dev/null >/dev/null 2>&1 & '
    'echo $! >> "$1"; i=$((i + 1)); done; echo answer; wait'
)
log = TaskLog(work / "task.log", rotate_bytes=1 << 20)
ended = Supervisor(
    ["sh", "-c", script, "sh", str(work / "pids")], cwd=work, env={"PATH": "/usr/bin:/bin"},
    stdin=b"", task_log=log, limits=Limits(deadline=time.monotonic() + 3, kill_grace=1.0),
    on_event=lambda event: True, heartbeat=lambda: True,
).run()
print(ended.stopped)
"""


def test_a_kill_short_of_descriptors_still_ends_the_tree_and_does_not_raise(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pids"
    pid_file.touch()
    try:
        daemon = subprocess.run(
            [sys.executable, "-c", LOW_LIMIT_DAEMON, str(tmp_path)],
            capture_output=True, text=True, timeout=120, check=False,
        )
    finally:
        survivors = _survivors(pid_file)
    assert (daemon.returncode, daemon.stdout.strip()) == (0, "timed_out"), daemon.stderr
    assert "could not be held by pidfd" in daemon.stderr
    assert len(pid_file.read_text().split()) == 200
    assert survivors == []


def test_a_process_in_the_middle_of_an_exec_is_still_known_by_its_token(tmp_path: Path) -> None:
    """An orphan is known as the tree's by the token in its environment, which reads empty
    while the process execs: a hook's leftover found just as it ran ``exec sleep 600``
    outlived its tree (CI, tests/daemon/test_command_trees.py's double fork, once).
    Caught: one read of the environment (about one read in seven is empty here)."""
    from lane_runner.providers import proctree

    again = tmp_path / "again"
    again.write_text('#!/bin/sh\nexec "$0"\n')  # an exec after another, for ever
    again.chmod(0o755)
    token = b"LANE_RUNNER_TEST_TOKEN=mid-exec"
    execing = subprocess.Popen([str(again)], env={"LANE_RUNNER_TEST_TOKEN": "mid-exec"})
    try:
        misses = sum(not proctree._carries_token(execing.pid, token) for _ in range(2000))
    finally:
        execing.kill()
        execing.wait()
    assert misses == 0
