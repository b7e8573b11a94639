"""The budget's pure decisions (``usage/budget.py``) on hand-made spend."""

from __future__ import annotations

import pytest

from lane_runner.usage import budget
from lane_runner.usage.spend import Totals


def spent(dollars: float) -> Totals:
    return Totals(cost_usd=dollars)


@pytest.mark.parametrize(
    ("task_limit", "daily_limit", "task_spent", "day_spent", "left"),
    [(1.0, 10.0, 0.5, 2.0, 0.5),    # the task's own limit is the smaller allowance
     (5.0, 3.0, 1.0, 2.5, 0.5),     # the board's day is
     (1.0, None, 0.25, 9.0, 0.75),  # no daily limit
     (None, 3.0, 9.0, 1.0, 2.0),    # no task limit
     (1.0, 10.0, 2.0, 2.0, 0.0)],   # spent past it: nothing, never negative
)
def test_a_cli_is_handed_the_smaller_of_what_is_left(
    task_limit: float | None, daily_limit: float | None, task_spent: float, day_spent: float,
    left: float,
) -> None:
    """claude's ``--max-budget-usd``: the smaller allowance. Catches ``max`` for ``min``."""
    limits = budget.Budget(max_cost_usd=task_limit, daily_usd=daily_limit)
    assert budget.dollars_left(limits, spent(task_spent), spent(day_spent)) == pytest.approx(left)


def test_no_dollar_limit_hands_no_allowance() -> None:
    assert budget.dollars_left(budget.Budget(max_tokens=100), spent(1.0), spent(1.0)) is None


@pytest.mark.parametrize("answered", [True, False])
def test_a_spent_budget_blocks_whether_or_not_the_worker_answered(answered: bool) -> None:
    reason = budget.spent_reason("the task's budget of 100 tokens is spent", answered)
    assert reason.startswith("budget spent: the task's budget of 100 tokens is spent")
    assert ("the worker had answered" in reason) is answered
