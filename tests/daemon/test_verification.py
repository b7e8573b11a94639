"""Acceptance checks and review, run by a real daemon with the simulated CLIs
(docs/verification.md, issue 41)."""

from __future__ import annotations

from typing import Any

import orjson

from lane_runner.board.model import EventKind, Outcome, Status, TaskSettings
from lane_runner.usage.record import read
from tests.harness import BOARD, Lane, assert_done_exactly_once

#: Fails, saying what would fix it, until the worktree holds the file: a simulated worker
#: in ``feedback`` makes it once the check's output was fed back (``SIM-FIX:``).
CHECK = (
    'test -f sim-checked.txt || { echo "tests failed"; echo "SIM-FIX: sim-checked.txt"; exit 1; }'
)


def run_until_idle(lane: Lane, status: int = 0) -> None:
    assert lane.start("--until-idle").wait(timeout=120) == status


def completed_metadata(lane: Lane, task_id: str) -> dict[str, Any]:
    [event] = [e for e in lane.board.events(task_id) if e.kind == EventKind.COMPLETED]
    data: dict[str, Any] = event.data["metadata"]
    return data


def attempts(lane: Lane, task_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = lane.lane_state(task_id)["attempts"]  # type: ignore[assignment]
    return found


def test_a_failing_check_is_fed_back_into_the_same_session_until_it_passes(lane: Lane) -> None:
    lane.write_config(checks=[CHECK])
    task = lane.add("checked", "[sim:feedback]", assignee="cli-codex-medium")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    assert_done_exactly_once(lane.board, [lane.home])
    tried = attempts(lane, task.id)
    assert [a["role"] for a in tried] == ["implement", "implement"]
    assert (lane.root / "worktrees").exists()
    verification = completed_metadata(lane, task.id)["verification"]
    assert verification["check_turns"] == 1
    first, second = verification["rounds"]
    assert [c["exit_code"] for c in first["checks"]] == [1]
    assert "SIM-FIX: sim-checked.txt" in first["checks"][0]["tail"]
    assert [c["exit_code"] for c in second["checks"]] == [0]
    # the second turn resumed the first one's session
    log = (lane.home.log_file(BOARD, task.id)).read_text()
    assert log.count("exec resume") == 1


def test_checks_that_keep_failing_block_the_task_with_kind_checks(lane: Lane) -> None:
    lane.write_config(checks=["echo broken build; exit 2"], check_turns=1)
    task = lane.add("never passes", assignee="cli-codex-medium")
    run_until_idle(lane, 4)
    blocked = lane.board.get_task(task.id)
    assert blocked.status is Status.BLOCKED and blocked.block_kind == "checks"
    assert "broken build" in (blocked.block_reason or "")
    assert len(attempts(lane, task.id)) == 2  # the answer, and the one turn fed back


def test_a_reviewer_of_the_other_provider_asks_for_changes_once_then_approves(
    lane: Lane,
) -> None:
    lane.write_config(checks=[CHECK], review="auto")
    task = lane.add("reviewed", "[sim:feedback]", assignee="cli-codex-medium")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    assert_done_exactly_once(lane.board, [lane.home])
    tried = attempts(lane, task.id)
    assert [(a["role"], a["provider"]) for a in tried] == [
        ("implement", "codex"), ("implement", "codex"), ("review", "claude"),
        ("implement", "codex"), ("review", "claude"),
    ]
    verification = completed_metadata(lane, task.id)["verification"]
    assert (verification["check_turns"], verification["review_rounds"]) == (1, 1)
    asked, approved = [r["verdict"] for r in verification["rounds"][1:]]
    assert asked["verdict"] == "request_changes" and asked["reviewer"] == "claude"
    assert asked["findings"][0]["file"] == "sim-reviewed.txt"
    assert approved["verdict"] == "approve"
    # the implementer resumed its one session for both turns fed back
    state = lane.lane_state(task.id)
    assert state["provider"] == "codex" and list(state["sessions"]) == ["codex"]
    assert_evidence(lane, task.id)
    assert_spend_by_role(lane, task.id, tried)
    assert_review_runs(lane, task.id, tried)


def assert_review_runs(lane: Lane, task_id: str, tried: list[dict[str, Any]]) -> None:
    """Each review is a run of its own on the board beside the implementer's, ended
    ``reviewed`` with its verdict; the reviewer's attempts and ledger records carry its
    id; ``task show`` says each run's role. Mutations: ``reviewrun.begin`` returning None
    (the review an attempt of the implementer's run: no review runs, its id on the
    records); the review run not ended (``ReviewRun.end``: outcome none); the role column
    left out of ``task show``."""
    runs = lane.runs(task_id)
    [implementer] = [r for r in runs if r.role == "implement"]
    reviews = [r for r in runs if r.role == "review"]
    assert [r.for_run for r in reviews] == [implementer.id, implementer.id]
    assert [r.outcome for r in reviews] == [Outcome.REVIEWED, Outcome.REVIEWED]
    assert [(r.reason or "").split(":")[0] for r in reviews] == ["request_changes", "approve"]
    assert {a["run_id"] for a in tried if a["role"] == "review"} == {r.id for r in reviews}
    records = read(lane.home.usage_file(BOARD))
    assert {r.run_id for r in records if r.role.value == "review"} == {r.id for r in reviews}
    assert {r.run_id for r in records if r.role.value == "implement"} == {implementer.id}
    shown = orjson.loads(lane.cli("task", "show", task_id, "--json").stdout)["runs"]
    assert [(r["role"], r["for_run"]) for r in shown] == [
        ("implement", None), ("review", implementer.id), ("review", implementer.id)]
    text = lane.cli("task", "show", task_id).stdout
    assert f"review of {implementer.id}" in text


def assert_spend_by_role(lane: Lane, task_id: str, tried: list[dict[str, Any]]) -> None:
    """The ledger's records say the role of the attempt that spent them, and every
    reader's totals by role are the ledger's. Mutations: the attempt's role not passed
    to ``Spending.on_usage`` (``run/attempt.py``) or not put on ``ledger.Attempt``
    (the reviewer's spend counted as the implementer's); the completed event's
    ``by_role`` or ``evidence`` totalled some other way than by the records' roles."""
    roles = {(a["run_id"], a["n"]): a["role"] for a in tried}
    records = read(lane.home.usage_file(BOARD))
    assert records and {r.role.value for r in records} == {"implement", "review"}
    assert all(r.role.value == roles[(r.run_id, r.attempt)] for r in records)
    said = lane.cli("usage", "--board", BOARD, "--task", task_id, "--by", "role", "--json")
    rows = {row.pop("role"): row for row in orjson.loads(said.stdout)["rows"]}
    usage = completed_metadata(lane, task_id)["usage"]
    evidence = orjson.loads(lane.cli("evidence", task_id, "--json").stdout)["usage_by_role"]
    assert usage["by_role"] == rows == evidence


def assert_evidence(lane: Lane, task_id: str) -> None:
    """``evidence`` as Markdown and JSON, and ``task show --json``'s ``evidence``, agree."""
    said = lane.cli("evidence", task_id, "--json")
    assert said.returncode == 0, said.stderr
    found = orjson.loads(said.stdout)
    assert [c["exit_code"] for c in found["checks"]] == [0]
    assert found["verdict"]["verdict"] == "approve"
    assert found["turns"] == {"goal_turn": 1, "check_turns": 1, "review_rounds": 1}
    assert set(found["usage_by_role"]) == {"implement", "review"}
    assert found["usage_by_role"]["review"]["total_tokens"] > 0
    assert found["diff"]["files"] == 3  # sim-output, sim-checked and sim-reviewed
    shown = orjson.loads(lane.cli("task", "show", task_id, "--json").stdout)
    assert shown["evidence"] == found
    markdown = lane.cli("evidence", task_id).stdout
    assert "### Acceptance checks (1 failing turn(s) fed back first)" in markdown
    assert "### Review: approve by claude" in markdown and "| review |" in markdown
    assert "Changes asked before" in markdown and "`sim-reviewed.txt`: missing" in markdown
    text = lane.cli("task", "show", task_id).stdout
    assert "checks and review:" in text and "request_changes by claude" in text


def test_evidence_of_a_task_not_done_says_so(lane: Lane) -> None:
    task = lane.add("waiting")
    said = lane.cli("evidence", task.id)
    assert said.returncode == 2 and "evidence comes with its completion" in said.stderr


def test_a_reviewer_that_keeps_asking_blocks_the_task_with_kind_review(lane: Lane) -> None:
    lane.write_config(review="claude", review_rounds=0)
    task = lane.add("rejected", "[sim:feedback]", assignee="cli-codex-medium")
    run_until_idle(lane, 4)
    blocked = lane.board.get_task(task.id)
    assert blocked.status is Status.BLOCKED and blocked.block_kind == "review"
    assert "sim-reviewed.txt" in (blocked.block_reason or "")


def test_a_tasks_own_check_and_review_win_over_the_boards(lane: Lane) -> None:
    lane.write_config(checks=["exit 1"], review="off")  # the board's: would never pass
    said = lane.cli("task", "add", "--title", "own rules", "--body", "[sim:feedback]",
                    "--assignee", "cli-codex-medium", "--workspace", str(lane.repo),
                    "--check", CHECK, "--check", "true", "--review", "claude", "--json")
    assert said.returncode == 0, said.stderr
    task_id = orjson.loads(said.stdout)["id"]
    run_until_idle(lane)
    assert lane.board.get_task(task_id).status is Status.DONE
    verification = completed_metadata(lane, task_id)["verification"]
    assert [c["command"] for c in verification["rounds"][-1]["checks"]] == [CHECK, "true"]
    assert verification["rounds"][-1]["verdict"]["reviewer"] == "claude"


def test_a_reviewer_this_runner_does_not_know_blocks_the_task_saying_so(lane: Lane) -> None:
    task = lane.add("odd reviewer", assignee="cli-codex-medium",
                    settings=TaskSettings(review="mistral"))
    run_until_idle(lane, 4)
    blocked = lane.board.get_task(task.id)
    assert blocked.block_kind == "capability" and "'mistral'" in (blocked.block_reason or "")
