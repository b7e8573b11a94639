"""Ctrl-C at a real daemon: the first says what it waits for, a second stops now, and
``status`` follows the stop: runs finishing during the grace, then the tasks left
running, which the next start resumes (``service/stopping.py``)."""

from __future__ import annotations

import re
import signal
import subprocess
from typing import Any

import orjson

from lane_runner.board.model import Status
from tests.harness import BOARD, Lane


def _status(lane: Lane) -> dict[str, Any]:
    done = lane.cli("status", "--json")
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)  # type: ignore[no-any-return]


def _log(lane: Lane) -> str:
    return (lane.root / "daemon.log").read_text(errors="replace")


def test_ctrl_c_says_what_it_waits_for_and_a_second_stops_now(lane: Lane) -> None:
    lane.write_config(shutdown_grace=600.0)  # the first Ctrl-C alone would wait this long
    hung = lane.add("hangs", body="[sim:hang]", assignee="cli-codex-medium")
    quick = lane.add("finishes in the grace", body="[sim:slow:0.3:10]", assignee="cli-codex-low")
    daemon = lane.start()
    lane.wait(lambda: len(_status(lane)["active"]) == 2, what="both runs to start")

    daemon.send_signal(signal.SIGINT)
    lane.wait(lambda: "Ctrl-C again stops now" in _log(lane), what="the first Ctrl-C's words")
    # Two, or one when the quick run ended first on a loaded machine.
    assert re.search(r"waiting up to 600 s for (2 runs|1 run) to finish", _log(lane))

    # The run that finishes during the grace leaves status; the daemon says it is stopping.
    lane.wait(lambda: lane.board.get_task(quick.id).status is Status.DONE, what="the quick run")
    lane.wait(lambda: [r["task_id"] for r in _status(lane)["active"]] == [hung.id],
              what="status to drop the finished run")
    shown = _status(lane)["daemon"]
    assert shown["state"] == "running" and shown["stopping"]["signal"] == "SIGINT"
    assert "waiting for 1 run(s)" in shown["detail"], shown["detail"]
    assert daemon.poll() is None  # still in its grace

    daemon.send_signal(signal.SIGINT)
    try:
        assert daemon.wait(timeout=60) == 0  # far less than the 600 s grace
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"a second Ctrl-C did not stop the daemon\n{_log(lane)[-3000:]}"
        ) from None
    assert "stopping now" in _log(lane)
    assert lane.live_workers() == []
    assert lane.board.get_task(hung.id).status is Status.RUNNING  # claimed, for the next start

    after = _status(lane)
    assert after["daemon"]["state"] == "stopped"
    left = after["boards"][BOARD]["left_running"]
    assert [t["task_id"] for t in left] == [hung.id]
    human = lane.cli("status").stdout
    assert "1 task(s) left running by a stopped daemon" in human and "next start" in human


def test_sigusr1_prints_every_threads_stack_and_stops_nothing(lane: Lane) -> None:
    """What an operator (or the bench) asks of a daemon that does not answer its stop
    signal: each thread's Python stack in the log, the run and the daemon going on.
    Caught: SIGUSR1 left at its default, which ends the daemon."""
    hung = lane.add("hangs", body="[sim:hang]", assignee="cli-codex-medium")
    daemon = lane.start()
    lane.wait(lambda: len(_status(lane)["active"]) == 1, what="the run to start")

    daemon.send_signal(signal.SIGUSR1)
    lane.wait(lambda: "Current thread" in _log(lane) and "daemon.py" in _log(lane),
              what="the stacks in the log")
    assert daemon.poll() is None
    assert [task.status for task in lane.tasks()] == [Status.RUNNING]

    daemon.send_signal(signal.SIGINT)
    daemon.send_signal(signal.SIGINT)  # a second stops now: the hung run is left to resume
    assert daemon.wait(timeout=60) == 0
    assert lane.board.get_task(hung.id).status is not Status.DONE
