"""Whether a worker's answer goes before the goal judge, and what the judge reads (pure:
``run/attempt.py`` asks the judge).

Every completed answer passes the structural check (no blockers, a summary that claims
no unfinished work); in goal mode (more than one goal turn) an answer the check accepts
goes to the configured judge, which has the last word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lane_runner.router.judge import structural_verdict
from lane_runner.router.verdict import Verdict


@dataclass(frozen=True)
class FirstLook:
    verdict: Verdict  # the structural check's
    asks_judge: bool  # the configured judge has the last word


def first_look(result: dict[str, Any] | None, goal_turns: int) -> FirstLook | None:
    """The structural check of a completed answer; None when there is none to judge."""
    if result is None or result["status"] != "completed":
        return None
    verdict = structural_verdict(result)
    return FirstLook(verdict, verdict.accepted and goal_turns > 1)


def context(task_context: str, turn: int, goal_turns: int, rejections: Sequence[str]) -> str:
    """What the judge reads: the task, and where the goal stands (turn and rejections)."""
    if turn <= 1 and not rejections:
        return task_context
    earlier = "\n".join(f"- {reason}" for reason in rejections) or "- (none recorded)"
    return (
        f"{task_context}\n\n## Goal so far\nThis is turn {turn} of at most "
        f"{goal_turns}. Earlier turns were not accepted because:\n{earlier}"
    )


def record(judge: str, verdict: Verdict) -> dict[str, Any]:
    """The judge's word as the completed event's metadata keeps it."""
    return {"judge": judge, "accepted": verdict.accepted, "reason": verdict.reason}
