"""A board whose file another process keeps locked for a minute costs the daemon nothing else.

Before the wait budget (lane_runner/board/retry.py) and resting boards
(lane_runner/service/resting.py), each write to a locked SQLite board waited
37 s, on the daemon's loop and inside the supervisor's pipe loop (heartbeats):
the other boards were starved and the running CLI's output was not read.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import time
from functools import partial
from pathlib import Path

from lane_runner.board.model import NewTask, Status
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
