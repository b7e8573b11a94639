"""The pure board decisions, without a database."""

from __future__ import annotations

import re

import pytest

from lane_runner.board import rules
from lane_runner.board.model import CompleteOutcome, NewTask, Outcome, Status
from lane_runner.errors import UsageError


def _completion(status: Status, **state: int | None) -> CompleteOutcome:
    fields = {"current_run_id": None, "completed_run_id": None, "latest_ended_run_id": None}
    fields.update(state)
    return rules.completion(7, status=status, result_matches=bool(fields.pop("same", 0)), **fields)


@pytest.mark.parametrize(
    ("status", "state", "expected"),
    [
        (Status.RUNNING, {"current_run_id": 7}, CompleteOutcome.COMPLETED),
        (Status.RUNNING, {"current_run_id": 8, "latest_ended_run_id": 7}, CompleteOutcome.STALE),
        (Status.DONE, {"completed_run_id": 7, "same": 1}, CompleteOutcome.DUPLICATE),
        (Status.DONE, {"completed_run_id": 7, "same": 0}, CompleteOutcome.STALE),
        (Status.DONE, {"completed_run_id": 6, "same": 1}, CompleteOutcome.STALE),
        (Status.READY, {"latest_ended_run_id": 7}, CompleteOutcome.REPLAYED),
        (Status.BLOCKED, {"latest_ended_run_id": 7}, CompleteOutcome.REPLAYED),
        (Status.READY, {"latest_ended_run_id": 8}, CompleteOutcome.STALE),
        (Status.TODO, {"latest_ended_run_id": 7}, CompleteOutcome.STALE),
        (Status.ARCHIVED, {"latest_ended_run_id": 7}, CompleteOutcome.STALE),
    ],
)
def test_completion(status: Status, state: dict[str, int], expected: CompleteOutcome) -> None:
    assert _completion(status, **state) is expected


def test_committed_outcomes() -> None:
    assert [o for o in CompleteOutcome if o.committed] == [
        CompleteOutcome.COMPLETED, CompleteOutcome.DUPLICATE, CompleteOutcome.REPLAYED,
    ]


def test_same_result_ignores_key_order() -> None:
    assert rules.same_result({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1})
    assert not rules.same_result({"a": 1}, {"a": 2})
    assert not rules.same_result(None, {})


def test_initial_status() -> None:
    assert rules.initial_status([]) is Status.READY
    assert rules.initial_status([Status.DONE, Status.DONE]) is Status.READY
    assert rules.initial_status([Status.DONE, Status.RUNNING]) is Status.TODO


def test_cycles() -> None:
    links = {"a": ["b"], "b": ["c"], "c": []}
    assert rules.ancestors("a", links.__getitem__) == {"b", "c"}
    assert rules.would_cycle("c", ["a"], lambda t: links.get(t, []))
    assert rules.would_cycle("x", ["x"], lambda t: links.get(t, []))
    assert not rules.would_cycle("x", ["a"], lambda t: links.get(t, []))


def test_claim_assignee() -> None:
    assert rules.claim_assignee(None, "cli-auto") == "cli-auto"
    assert rules.claim_assignee(None, "") is None
    assert rules.claim_assignee("cli-claude-high", "cli-auto") == "cli-claude-high"
    assert rules.claim_assignee("human-bob", "cli-auto") is None


def test_failures_and_cooldown() -> None:
    assert not rules.gives_up(2, 3)
    assert rules.gives_up(3, 3)
    assert [rules.cooldown(n, base=10, cap=50) for n in (1, 2, 3, 4)] == [10, 20, 40, 50]
    assert rules.cooldown(100_000, base=60, cap=3600) == 3600  # no float overflow after months


def test_checked_task_normalises() -> None:
    checked = rules.checked_task(NewTask(title="  t  ", assignee="", parents=("a", "a", "b")))
    assert (checked.title, checked.assignee, checked.parents) == ("t", None, ("a", "b"))
    assert re.fullmatch(r"t-[0-9a-f]{8}", rules.new_task_id())


@pytest.mark.parametrize(
    ("new", "words"),
    [
        (NewTask(title=" "), "title"),
        (NewTask(title="t", id=".."), "invalid task id"),
        (NewTask(title="t", assignee="cli-codex-max"), "invalid assignee"),
        (NewTask(title="t", parents=("a/b",)), "invalid parent"),
        (NewTask(title="t", body="x" * (rules.MAX_BODY_BYTES + 1)), "256 KiB"),
        (NewTask(title="t", goal_turns=0), "goal turns"),
        (NewTask(title="t", max_runtime=0), "max runtime"),
    ],
)
def test_checked_task_refuses(new: NewTask, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        rules.checked_task(new)


def test_body_limit_counts_bytes() -> None:
    rules.checked_task(NewTask(title="t", body="x" * rules.MAX_BODY_BYTES))
    with pytest.raises(UsageError):
        rules.checked_task(NewTask(title="t", body="é" * (rules.MAX_BODY_BYTES // 2 + 1)))


def test_reclaim_outcomes() -> None:
    assert rules.check_reclaim_outcome(Outcome.EXPIRED) is Outcome.EXPIRED
    with pytest.raises(UsageError):
        rules.check_reclaim_outcome(Outcome.COMPLETED)
