"""Whether an answer goes before the goal judge, and what the judge reads
(``run/judging.py``; pure)."""

from __future__ import annotations

from typing import Any

from lane_runner.router.verdict import Verdict
from lane_runner.run import judging


def answer(status: str = "completed", summary: str = "did it", **more: Any) -> dict[str, Any]:
    return {"status": status, "summary": summary, "blockers": [], **more}


def test_only_a_completed_answer_is_judged() -> None:
    assert judging.first_look(None, 3) is None
    assert judging.first_look(answer("blocked"), 3) is None
    assert judging.first_look(answer("incomplete"), 3) is None


def test_a_goal_asks_the_judge_once_the_structural_check_accepts() -> None:
    look = judging.first_look(answer(), 3)
    assert look is not None and look.verdict.accepted and look.asks_judge


def test_one_turn_or_a_structural_rejection_asks_no_judge() -> None:
    single = judging.first_look(answer(), 1)
    assert single is not None and single.verdict.accepted and not single.asks_judge
    rejected = judging.first_look(answer(blockers=["no access"]), 3)
    assert rejected is not None and not rejected.verdict.accepted and not rejected.asks_judge


def test_the_judge_reads_the_goal_so_far_after_the_first_turn() -> None:
    assert judging.context("the task", 1, 3, []) == "the task"
    said = judging.context("the task", 2, 3, ["tests fail"])
    assert said.startswith("the task\n\n## Goal so far") and "turn 2 of at most 3" in said
    assert "- tests fail" in said
    assert "- (none recorded)" in judging.context("the task", 2, 3, [])


def test_the_verdict_as_the_completed_event_keeps_it() -> None:
    assert judging.record("router", Verdict(False, "no")) == {
        "judge": "router", "accepted": False, "reason": "no",
    }
