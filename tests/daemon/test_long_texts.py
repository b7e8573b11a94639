"""A worker's megabytes never freeze the daemon (issue 26, finding 3).

One worker answers with a 2 MB summary of ``a-a-…``, a run the former URL pattern of
``redact`` took quadratic time on while holding the interpreter: a bystander's
heartbeat aged to minutes. The summary reaches the log, the block reason and the
board; each is bounded before anything reads it.
"""

from __future__ import annotations

import signal
import time

import orjson

from lane_runner.board.model import Status
from lane_runner.display import MAX_REASON_CHARS
from tests.harness import BOARD, Lane

SUMMARY_CHARS = 2 << 20
HEARTBEAT = 0.2
#: A bystander's heartbeats may be late by this many intervals on a loaded machine;
#: the frozen daemon made them minutes late.
MOST_INTERVALS_LATE = 25


def _gaps(stamps: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(stamps, stamps[1:], strict=False)]


def test_a_two_megabyte_summary_does_not_delay_a_bystanders_heartbeat(lane: Lane) -> None:
    lane.write_config(concurrency=2, heartbeat_interval=HEARTBEAT, stall_timeout=600.0)
    bystander = lane.add("bystander", body="[sim:hang]", assignee="cli-codex-low")
    daemon = lane.start()
    lane.wait(lambda: lane.board.get_task(bystander.id).current_run_id is not None,
              what="the bystander's claim")
    run_id = lane.board.get_task(bystander.id).current_run_id
    assert run_id is not None
    heavy = lane.add("long summary", body=f"[sim:long-summary:{SUMMARY_CHARS}]",
                     assignee="cli-claude-low")
    stamps: list[float] = []

    def heavy_blocked() -> bool:
        stamp = lane.board.get_run(run_id).heartbeat_at
        if not stamps or stamp != stamps[-1]:
            stamps.append(stamp)
        return lane.board.get_task(heavy.id).status is Status.BLOCKED

    lane.wait(heavy_blocked, timeout=120, what="the long summary's task to be blocked")
    settle = time.monotonic() + 5 * HEARTBEAT
    while time.monotonic() < settle:
        heavy_blocked()
        time.sleep(0.05)
    stamps.append(time.time())  # heartbeats that stopped altogether count too
    assert max(_gaps(stamps)) < MOST_INTERVALS_LATE * HEARTBEAT, stamps
    reason = lane.board.runs(heavy.id)[-1].reason or ""
    assert "the worker reported incomplete work: a-a-a-" in reason
    assert len(reason) < MAX_REASON_CHARS + 100
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_completed_answer_larger_than_the_journal_holds_is_committed_cut_to_fit(
    lane: Lane,
) -> None:
    """A finished answer of megabytes is the task's result, cut to fit a journal record
    (1 MiB) and saying where the whole answer is: the run's candidate, kept whole."""
    task = lane.add("long answer", body=f"[sim:long-answer:{SUMMARY_CHARS}]",
                    assignee="cli-codex-low")
    assert lane.start("--until-idle").wait(timeout=120) == 0
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE, lane.board.runs(task.id)
    assert done.result is not None and done.summary == done.result["summary"]
    assert done.summary.startswith("done: xxx") and len(done.summary) < 64 * 1024
    assert "lane-runner cut this answer to fit its journal" in done.result["findings"][-1]
    assert lane.board.get_task(task.id).failure_count == 0
    [candidate] = lane.home.lane_dir(BOARD).glob(f"{task.id}.run-*.candidate-*.json")
    whole = orjson.loads(candidate.read_bytes())
    assert len(whole["summary"]) == len("done: ") + SUMMARY_CHARS
    assert len(whole["findings"]) == 200
