"""The executor's decision table, row by row (pure: no processes, no board)."""

from __future__ import annotations

from typing import Any

import pytest

from lane_runner.board.model import BlockKind, Outcome
from lane_runner.providers import Classification
from lane_runner.providers.usage import LimitNotice
from lane_runner.run.decide import (
    HealthNote,
    Said,
    Step,
    after_attempt,
    health_after,
    waits_for_capacity,
)


def result(
    status: str = "completed", summary: str = "did it", blockers: list[str] | None = None
) -> dict[str, Any]:
    return {
        "status": status,
        "summary": summary,
        "changed_files": [],
        "tests_run": [],
        "artifacts": [],
        "findings": [],
        "blockers": blockers or [],
    }


def decide(classification: str = "ok", structured: dict[str, Any] | None = None, **overrides: Any):
    arguments: dict[str, Any] = dict(
        accepted=True, verdict_reason="", turn=1, goal_turns=1, time_left=True, fell_back=False
    )
    arguments.update(overrides)
    return after_attempt(Classification(classification), "why", structured, **arguments)


def test_an_accepted_completed_result_is_committed() -> None:
    decision = decide(structured=result())
    assert decision.step is Step.ACCEPT and decision.reason == "did it"


@pytest.mark.parametrize("classification", ["lease_lost", "cancelled"])
def test_a_run_that_is_no_longer_ours_is_abandoned(classification: str) -> None:
    assert decide(classification, result()).step is Step.ABANDON


@pytest.mark.parametrize(
    "classification", ["capacity", "auth", "stalled", "misconfigured", "unusable"]
)
def test_an_unavailable_provider_falls_back_once(classification: str) -> None:
    decision = decide(classification)
    assert decision.step is Step.FALLBACK and not decision.count_failure


@pytest.mark.parametrize("classification", ["capacity", "auth", "stalled", "misconfigured"])
def test_every_provider_unavailable_means_a_cooldown_not_a_failure(classification: str) -> None:
    decision = decide(classification, fell_back=True)
    assert decision.step is Step.COOLDOWN
    assert decision.outcome is Outcome.RECLAIMED and not decision.count_failure


def test_no_usable_provider_at_all_is_a_capability_block() -> None:
    decision = decide("unusable", fell_back=True)
    assert decision.step is Step.BLOCK and decision.kind is BlockKind.CAPABILITY


def test_timeout_is_a_counted_failure() -> None:
    decision = decide("timed_out")
    assert (decision.step, decision.outcome, decision.count_failure) == (
        Step.RETRY,
        Outcome.TIMED_OUT,
        True,
    )


@pytest.mark.parametrize("classification", ["failed", "killed_by_signal", "session_missing"])
def test_provider_failures_are_counted(classification: str) -> None:
    decision = decide(classification)
    assert (decision.step, decision.outcome, decision.count_failure) == (
        Step.RETRY,
        Outcome.FAILED,
        True,
    )


def test_ok_without_a_structured_result_is_a_counted_failure() -> None:
    decision = decide("ok", None)
    assert decision.step is Step.RETRY and decision.count_failure
    assert "structured" in decision.reason


def test_a_blocked_worker_blocks_the_task_with_its_blockers() -> None:
    decision = decide(structured=result("blocked", blockers=["need the API key", "no spec"]))
    assert decision.step is Step.BLOCK and decision.kind is BlockKind.NEEDS_INPUT
    assert "need the API key; no spec" in decision.reason


def test_a_rejected_answer_continues_while_turns_and_time_remain() -> None:
    decision = decide(structured=result(), accepted=False, verdict_reason="TODO left", goal_turns=3)
    assert decision.step is Step.CONTINUE and decision.reason == "TODO left"


def test_incomplete_work_continues_in_goal_mode() -> None:
    decision = decide(structured=result("incomplete", "half"), accepted=False, goal_turns=2)
    assert decision.step is Step.CONTINUE and "half" in decision.reason


@pytest.mark.parametrize(
    "overrides", [dict(turn=3, goal_turns=3), dict(goal_turns=3, time_left=False)]
)
def test_no_turns_or_time_left_blocks_for_a_person(overrides: dict[str, Any]) -> None:
    decision = decide(structured=result(), accepted=False, verdict_reason="TODO left", **overrides)
    assert decision.step is Step.BLOCK and decision.kind is BlockKind.NEEDS_INPUT
    assert "TODO left" in decision.reason


def test_too_little_runtime_for_another_turn_says_so() -> None:
    decision = decide(
        structured=result("incomplete", "half"), accepted=False, goal_turns=3, time_left=False
    )
    assert decision.step is Step.BLOCK and "too little runtime left" in decision.reason


def test_every_classification_has_a_decision() -> None:
    """The match is exhaustive (mypy holds it statically, tests/test_static.py)."""
    for classification in Classification:
        assert decide(classification.value).step in Step


def test_a_request_the_model_api_refuses_blocks_with_its_words() -> None:
    """Refused (the context window, an invalid request): a retry would be refused again."""
    decision = decide("refused")
    assert decision.step is Step.BLOCK and decision.kind is BlockKind.CAPABILITY
    assert decision.reason == "the model API refused the task: why"
    assert not decision.count_failure


@pytest.mark.parametrize(
    ("step", "waits"),
    [(Step.FALLBACK, True), (Step.COOLDOWN, True), (Step.RETRY, False), (Step.BLOCK, False),
     (Step.CONTINUE, False), (Step.ACCEPT, False), (Step.ABANDON, False)],
)
def test_only_moving_away_from_a_provider_waits_for_a_usage_limit(step: Step, waits: bool) -> None:
    """A task's own failure or block must not park it behind a usage limit."""
    assert waits_for_capacity(step) is waits


def test_a_usage_limit_with_a_reset_ahead_is_a_limit_until_then() -> None:
    notice = LimitNotice("You've hit your usage limit", resets_at=200.0)
    note = health_after(Classification.CAPACITY, "capacity", notice, now=100.0)
    assert note == HealthNote(Said.LIMIT, "You've hit your usage limit", resets_at=200.0)


@pytest.mark.parametrize("resets_at", [None, 100.0, 50.0])
def test_a_limit_without_a_reset_ahead_is_a_capacity_failure(resets_at: float | None) -> None:
    notice = LimitNotice("usage limit", resets_at=resets_at)
    note = health_after(Classification.CAPACITY, "out of credit", notice, now=100.0)
    assert note == HealthNote(Said.FAILURE, "out of credit", kind="capacity")


@pytest.mark.parametrize(
    ("classification", "said", "kind"),
    [("auth", Said.FAILURE, "auth"), ("misconfigured", Said.FAILURE, "misconfigured"),
     ("ok", Said.SUCCESS, None)],
)
def test_what_an_attempt_says_of_its_provider(
    classification: str, said: Said, kind: str | None
) -> None:
    note = health_after(Classification(classification), "why", None, now=0.0)
    assert note is not None and note.said is said
    if kind is not None:
        assert (note.kind, note.words) == (kind, "why")


@pytest.mark.parametrize(
    "classification",
    ["stalled", "timed_out", "failed", "refused", "session_missing", "cancelled", "unusable"],
)
def test_the_tasks_own_trouble_says_nothing_of_the_provider(classification: str) -> None:
    """A stall or a crash must not mark a provider unavailable for every other task."""
    assert health_after(Classification(classification), "why", None, now=0.0) is None
