"""A board whose file another process keeps locked costs the daemon nothing else, and loses
no run.

Before the wait budget (lane_runner/board/retry.py) and resting boards
(lane_runner/service/resting.py), each write to a locked SQLite board waited
37 s, on the daemon's loop and inside the supervisor's pipe loop (heartbeats):
the other boards were starved and the running CLI's output was not read.
Before the executor retried a run's ending (``Lease.until_landed``), a
board locked for two seconds when runs ended left them ``running`` with no slot
behind them until their leases ran out (issue 26, finding 4).
"""

from __future__ import annotations

import re
import signal
import sqlite3
import time
from functools import partial
from pathlib import Path

import orjson

from lane_runner.board.model import NewTask, Outcome, Status
from tests.harness import Lane

HOLD = 60.0  # seconds the test holds the stuck board's write lock
SAMPLES = 6  # looks during the hold, each must see progress since the one before
STUCK = "stuck"


def lines(path: Path, pattern: str) -> int:
    text = path.read_text(errors="replace") if path.exists() else ""
    return len(re.findall(pattern, text))


def done(lane: Lane, task_id: str) -> bool:
    return lane.board.get_task(task_id).status is Status.DONE


def test_a_board_locked_for_a_minute_stalls_nothing_else(lane: Lane) -> None:
    lane.write_config(lease_ttl=600.0)  # the stuck run's lease outlives the lock
    lane.store.create_board(STUCK)
    stuck_board = lane.store.board(STUCK)
    # Streams one event every half second for longer than the lock is held.
    stuck = stuck_board.add_task(
        NewTask(title="streams", body="[sim:slow:0.5:140]", assignee="cli-auto",
                workspace=str(lane.repo))
    )
    stream_log = lane.home.log_file(STUCK, stuck.id)
    daemon_log = lane.root / "daemon.log"
    daemon = lane.start()
    lane.wait(lambda: lines(stream_log, "still working") > 0, what="the stuck board's CLI")
    run_id = stuck_board.get_task(stuck.id).current_run_id
    lost_beats = rf"heartbeat for run {run_id} not stored"

    blocker = sqlite3.connect(lane.home.board_file(STUCK), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # every write to the stuck board is refused now
    released_at = time.monotonic() + HOLD
    try:
        # A long task on the other board: its heartbeats must keep landing.
        steady = lane.add("steady", body="[sim:slow:0.5:200]")
        lane.wait(lambda: lane.board.get_task(steady.id).status is Status.RUNNING,
                  what="the other board's long task to be claimed")
        seen = (lines(stream_log, "still working"), lines(daemon_log, lost_beats),
                lane.board.runs(steady.id)[-1].heartbeat_at)
        for sample in range(SAMPLES):
            quick = lane.add(f"quick {sample}")  # the other board is served meanwhile
            lane.wait(partial(done, lane, quick.id), timeout=HOLD, what=f"quick task {sample}")
            time.sleep(max(0.0, (released_at - time.monotonic()) / (SAMPLES - sample)))
            now = (lines(stream_log, "still working"), lines(daemon_log, lost_beats),
                   lane.board.runs(steady.id)[-1].heartbeat_at)
            assert now[0] > seen[0], "the stuck board's CLI stopped streaming"
            assert now[1] > seen[1], "heartbeats of the stuck board's run stopped"
            assert now[2] > seen[2], "heartbeats on the other board stopped landing"
            seen = now
        assert stuck_board.get_task(stuck.id).status is Status.RUNNING
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    assert "leaving board stuck alone" in daemon_log.read_text(errors="replace")
    lane.wait(lambda: stuck_board.get_task(stuck.id).status is Status.DONE, timeout=120,
              what="the stuck board's task to finish once the lock is gone")
    ended = [r.id for r in stuck_board.runs(stuck.id) if r.outcome is not None]
    assert ended == [run_id]  # the same run, never expired or retried
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0


PUBLISHED = 2.5  # seconds by which status.json shows what the daemon's slots hold now


def attempts_ended(lane: Lane, task_id: str) -> int:
    path = lane.home.lane_dir("work") / f"{task_id}.json"
    if not path.exists():
        return 0
    return sum(a["ended_at"] is not None for a in orjson.loads(path.read_bytes())["attempts"])


def test_runs_ending_on_a_locked_board_keep_their_slots_and_land(lane: Lane) -> None:
    """Every way a run ends meets a board another process keeps locked for longer than the
    wait budget: each run keeps its slot (status shows it), and its ending lands once the
    lock is gone, never left ``running`` until its lease (10 minutes here) runs out."""
    lane.write_config(lease_ttl=600.0)
    gate = lane.root / "gate"
    gate.touch()  # every CLI waits at it (LANE_RUNNER_SIM_GATE) until the board is locked
    lane.extra_env["LANE_RUNNER_SIM_GATE"] = str(gate)
    ends = {  # body, attempts, the outcome of the first run
        "accepted": ("", 1, Outcome.COMPLETED),
        "blocked": ("[sim:blocked]", 1, Outcome.BLOCKED),
        "failed": ("[sim:crash]", 1, Outcome.FAILED),
        "cooled": ("[sim:capacity]", 2, Outcome.RECLAIMED),  # both providers, then a cooldown
    }
    tasks = {name: lane.add(name, body=body) for name, (body, _, _) in ends.items()}
    daemon = lane.start()
    lane.wait(lambda: len(lane.live_workers()) == len(tasks), what="every CLI at the gate")
    first_runs = {lane.runs(task.id)[0].id for task in tasks.values()}

    blocker = sqlite3.connect(lane.home.board_file("work"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # every write to the board is refused now
    try:
        gate.unlink()
        lane.wait(
            lambda: all(attempts_ended(lane, tasks[name].id) >= ends[name][1] for name in ends)
            and not lane.live_workers(),
            what="every CLI to finish while the board is locked",
        )
        time.sleep(PUBLISHED)
        shown = lane.cli("status", "--json")
        assert shown.returncode == 0, shown.stderr
        held = {run["run_id"] for run in orjson.loads(shown.stdout)["active"]}
        assert {run.id for run in lane.board.running_runs()} == first_runs
        assert first_runs <= held, "status shows runs on the board that no slot holds"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    lane.wait(
        lambda: all(lane.runs(task.id)[0].outcome is not None for task in tasks.values()),
        timeout=60,
        what="every run's ending to land once the lock is gone",
    )
    for name, task in tasks.items():
        first = lane.runs(task.id)[0]
        assert first.outcome is ends[name][2], (name, first.outcome, first.reason)
    lane.wait(partial(done, lane, tasks["accepted"].id), what="the accepted result on the board")
    assert lane.board.get_task(tasks["blocked"].id).status is Status.BLOCKED
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
