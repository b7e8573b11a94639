"""Acceptance checks and review on the shared PostgreSQL board: a check failing once and a
reviewer asking for changes once end in one completion with its evidence; the new block
kinds are stored; a kill -9 inside the review asks the reviewer again and delivers once
(docs/verification.md)."""

from __future__ import annotations

from typing import Any

import orjson

from lane_runner.board.model import NewTask, Outcome, Status

from .conftest import BOARD, WORKSPACE, Fleet

CHECK = 'test -f sim-checked.txt || { echo "SIM-FIX: sim-checked.txt"; exit 1; }'


def add(fleet: Fleet, title: str, body: str = "") -> str:
    task = fleet.board.add_task(
        NewTask(title=title, body=body, workspace=WORKSPACE, assignee="cli-codex-medium")
    )
    return task.id


def roles(pod_root: Any, task_id: str) -> list[str]:
    path = pod_root / "lanes" / BOARD / f"{task_id}.json"
    if not path.exists():
        return []
    return [a["role"] for a in orjson.loads(path.read_bytes())["attempts"]]


def test_checks_and_review_fed_back_then_done_once_with_evidence(fleet: Fleet) -> None:
    pod = fleet.pod("pod-a")
    pod.write_config(checks=[CHECK], review="auto")
    task_id = add(fleet, "verified", "[sim:feedback]")
    assert pod.start("--until-idle").wait(timeout=180) == 0, pod.log_tail()
    fleet.assert_done_exactly_once()
    assert roles(pod.root, task_id) == ["implement", "implement", "review", "implement",
                                        "review"]
    said = pod.cli("evidence", task_id, "--json")
    assert said.returncode == 0, said.stderr
    found = orjson.loads(said.stdout)
    assert found["turns"]["check_turns"] == 1 and found["turns"]["review_rounds"] == 1
    assert found["verdict"]["verdict"] == "approve"


def test_the_block_kinds_checks_and_review_are_stored(fleet: Fleet) -> None:
    pod = fleet.pod("pod-a")
    pod.write_config(checks=["echo red; exit 1"], check_turns=0)
    checked = add(fleet, "never green")
    assert pod.start("--until-idle").wait(timeout=180) == 4, pod.log_tail()
    pod.write_config(checks=[], review="claude", review_rounds=0)
    reviewed = add(fleet, "never approved", "[sim:feedback]")
    assert pod.start("--until-idle").wait(timeout=180) == 4, pod.log_tail()
    kinds = {t.id: (t.status, t.block_kind) for t in fleet.tasks()}
    assert kinds == {checked: (Status.BLOCKED, "checks"), reviewed: (Status.BLOCKED, "review")}


def test_a_kill_inside_the_review_asks_again_and_delivers_once(fleet: Fleet) -> None:
    pod = fleet.pod("pod-a")
    pod.write_config(review="claude")
    fleet.control.write_bytes(orjson.dumps({"claude": "hang"}))
    task_id = add(fleet, "killed in review")
    pod.start()
    fleet.wait(lambda: roles(pod.root, task_id) == ["implement", "review"],
               timeout=120, what="the reviewer running")
    pod.kill()
    assert fleet.board.get_task(task_id).status is Status.RUNNING  # nothing delivered
    fleet.control.write_bytes(orjson.dumps({}))
    assert pod.start("--until-idle").wait(timeout=180) == 0, pod.log_tail()
    fleet.assert_done_exactly_once()
    assert roles(pod.root, task_id) == ["implement", "review", "review"]
    # Each review a run of its own; the one the kill left open ended by pod-a's restart.
    runs = fleet.board.runs(task_id)
    assert [r.role for r in runs] == ["implement", "review", "implement", "review"]
    assert [r.outcome for r in runs if r.role == "review"] == [Outcome.RECLAIMED,
                                                               Outcome.REVIEWED]


def test_a_kill_inside_a_check_runs_the_checks_again_and_delivers_once(fleet: Fleet) -> None:
    pod = fleet.pod("pod-a")
    ran, held = pod.root / "checks.log", pod.root / "held"
    pod.write_config(checks=[f"echo ran >> {ran}; [ -e {held} ] || {{ touch {held}; sleep 600; }}"])
    task_id = add(fleet, "killed in its check")
    pod.start()
    fleet.wait(held.exists, timeout=120, what="the check running")
    pod.kill()
    assert fleet.board.get_task(task_id).status is Status.RUNNING  # nothing delivered
    assert pod.start("--until-idle").wait(timeout=180) == 0, pod.log_tail()
    fleet.assert_done_exactly_once()
    assert ran.read_text().split() == ["ran", "ran"]
    assert roles(pod.root, task_id) == ["implement"]  # the answer was not asked again


def test_a_dead_pods_review_run_ends_with_the_rescue_of_its_run(fleet: Fleet) -> None:
    """pod-a dies with its reviewer at work; pod-b rescues the expired run, which ends the
    review run beside it too (the review runs' cascade in ``_end_run``), then does the
    task once. Mutation: ``_end_run`` not ending the run's review runs (the review run
    stays open for ever: pod-a never starts again)."""
    doomed, rescuer = fleet.pod("pod-a"), fleet.pod("pod-b")
    for pod in (doomed, rescuer):
        pod.write_config(review="claude")
    fleet.control.write_bytes(orjson.dumps({"claude": "hang"}))
    task_id = add(fleet, "its reviewer's pod dies")
    doomed.start()
    fleet.wait(lambda: roles(doomed.root, task_id) == ["implement", "review"],
               timeout=120, what="the reviewer running")
    doomed.kill()
    fleet.control.write_bytes(orjson.dumps({}))
    rescuer.start()
    fleet.wait(lambda: fleet.board.get_task(task_id).status is Status.DONE, timeout=180,
               what="pod-b to rescue the run and do the task")
    rescuer.kill()
    fleet.assert_done_exactly_once()
    first, review, *_ = fleet.board.runs(task_id)
    assert (review.role, review.for_run) == ("review", first.id)
    assert (first.outcome, review.outcome) == (Outcome.EXPIRED, Outcome.EXPIRED)
    assert review.reason == f"run {first.id}, which it reviewed, ended"
    assert all(run.ended_at is not None for run in fleet.board.runs(task_id))
