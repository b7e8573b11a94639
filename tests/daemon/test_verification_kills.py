"""kill -9 inside a task's acceptance checks and inside its review: the next start repeats
only that step, never asks the implementer for the answer again, never delivers an
unreviewed result, never asks for a saved verdict again (docs/verification.md)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import orjson

from lane_runner.board.model import Outcome, Status
from lane_runner.board.sql.reviews import LEFT_OPEN
from tests.harness import Lane, assert_done_exactly_once, hold_commit


def roles(lane: Lane, task_id: str) -> list[str]:
    if not (lane.home.lane_dir("work") / f"{task_id}.json").exists():
        return []
    tried: list[dict[str, Any]] = lane.lane_state(task_id)["attempts"]  # type: ignore[assignment]
    return [a["role"] for a in tried]


def kill(lane: Lane) -> None:
    """kill -9 the daemon: whatever it started is left to the next start's recovery."""
    [daemon] = [d for d in lane.daemons if d.poll() is None]
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()


def slots(lane: Lane) -> dict[str, int]:
    """The codex and claude slots the daemon last published as held."""
    if not lane.home.status_file.exists():
        return {}
    published = orjson.loads(lane.home.status_file.read_bytes()).get("providers") or {}
    held = published.get("providers") or {}
    return {p: held[p]["running"] for p in ("codex", "claude") if p in held}


def phase(lane: Lane, task_id: str) -> str | None:
    path = lane.home.lane_dir("work") / f"{task_id}.json"
    if not path.exists():
        return None
    verification = lane.lane_state(task_id).get("verification")
    return None if not isinstance(verification, dict) else str(verification["phase"])


def test_a_kill_inside_a_check_runs_the_checks_again_not_the_implementer(lane: Lane) -> None:
    ran, held = lane.root / "checks.log", lane.root / "held"
    check = f"echo ran >> {ran}; [ -e {held} ] || {{ touch {held}; sleep 600; }}"
    lane.write_config(checks=[check], review="auto")
    task = lane.add("killed in its check", assignee="cli-codex-medium")
    lane.start()
    lane.wait(held.exists, what="the check running")
    assert phase(lane, task.id) == "checking"
    kill(lane)
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert lane.board.get_task(task.id).status is Status.DONE
    assert_done_exactly_once(lane.board, [lane.home])
    assert ran.read_text().split() == ["ran", "ran"]  # the step repeated, once
    [event] = [e for e in lane.board.events(task.id) if e.kind == "completed"]
    assert event.data["metadata"]["judge"]["judge"] == "earlier run"
    assert roles(lane, task.id) == ["implement", "review"]  # the answer was not asked again


def test_a_kill_inside_the_review_asks_the_reviewer_again_and_delivers_only_then(
    lane: Lane,
) -> None:
    lane.write_config(review="claude")
    lane.set_capacity({"claude": "hang"})  # the reviewer starts, then says nothing
    task = lane.add("killed in its review", assignee="cli-codex-medium")
    lane.start()
    lane.wait(lambda: roles(lane, task.id) == ["implement", "review"] and bool(
        lane.live_workers()), what="the reviewer running")
    assert phase(lane, task.id) == "reviewing"
    [first, left] = lane.runs(task.id)  # the reviewer's run of its own, open beside the first
    assert (left.role, left.for_run, left.ended_at) == ("review", first.id, None)
    # The run's slot is its reviewer's provider's meanwhile, not its implementer's
    # (mutation: no ``Routing.move_to`` in the verifier: codex 1, claude 0 all along).
    lane.wait(lambda: slots(lane) == {"codex": 0, "claude": 1}, what="the reviewer's slot")
    [flight] = orjson.loads(lane.home.status_file.read_bytes())["active"]
    assert (flight["run_id"], flight["role"], flight["review_run"]) == (first.id, "review",
                                                                        left.id)
    kill(lane)
    # Nothing was delivered: no commit of a result, no completion, no pending record.
    assert lane.board.get_task(task.id).status is Status.RUNNING
    assert not list(lane.home.lane_dir("work").glob("*.terminal.*"))
    lane.set_capacity({})
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert lane.board.get_task(task.id).status is Status.DONE
    assert_done_exactly_once(lane.board, [lane.home])
    assert roles(lane, task.id) == ["implement", "review", "review"]
    # The next start's recovery ended the review run the kill left open, first (mutation:
    # no ``_end_review_runs`` in recovery: the reclaim of its implementer's run ended it,
    # saying so instead); the review asked again is a new run of its own.
    ended = {run.id: run for run in lane.runs(task.id)}
    assert ended[left.id].outcome == Outcome.RECLAIMED and ended[left.id].reason == LEFT_OPEN
    again = [r for r in ended.values() if r.role == "review" and r.id != left.id]
    assert [r.outcome for r in again] == [Outcome.REVIEWED]
    assert all(run.ended_at is not None for run in ended.values())


def test_a_kill_after_the_verdict_never_asks_for_it_again(lane: Lane, tmp_path: Path) -> None:
    held, release = tmp_path / "held", tmp_path / "release"
    lane.extra_env.update(hold_commit(held, release))
    lane.write_config(review="claude")
    task = lane.add("killed after its approval", assignee="cli-codex-medium")
    lane.start()
    lane.wait(held.exists, what="the approved result's commit")
    kill(lane)
    lane.extra_env.clear()
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert_done_exactly_once(lane.board, [lane.home])
    assert roles(lane, task.id) == ["implement", "review"]
    [first, reviewed, second] = lane.runs(task.id)
    assert (reviewed.role, reviewed.for_run, reviewed.outcome) == (
        "review", first.id, Outcome.REVIEWED)
    # the second run delivered what the first one's reviewer approved
    assert second.role == "implement" and second.outcome == "completed"


def test_a_task_stop_ends_a_check_at_once(lane: Lane) -> None:
    held = lane.root / "held"
    lane.write_config(checks=[f"touch {held}; sleep 600"])
    task = lane.add("stopped in its check", assignee="cli-codex-medium")
    daemon = lane.start("--until-idle")
    lane.wait(held.exists, what="the check running")
    said = lane.cli("task", "stop", task.id, "--reason", "not today")
    assert said.returncode == 0, said.stderr
    assert daemon.wait(timeout=60) == 4  # blocked, long before the check's 600 s
    stopped = lane.board.get_task(task.id)
    assert stopped.status is Status.BLOCKED and "not today" in (stopped.block_reason or "")
