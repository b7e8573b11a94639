"""Budgets: how much a task, and a board in one UTC day, may spend (pure).

A task's budget is its own (``task add --max-cost-usd`` / ``--max-tokens``), else the
configured default (``max_cost_usd`` / ``max_tokens``); a board's is
``daily_budget_usd`` (its own entry, else ``"*"``). Spend is read from the usage
ledger: a task's across all its runs and providers, a board's over the UTC day.
Dollars the ledger could not price are not in the dollar figure (they are unknown,
never guessed), so a dollar budget sees only the known spend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lane_runner.usage.spend import Totals


@dataclass(frozen=True)
class Budget:
    """The limits one run works under; None: no limit of that kind."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    daily_usd: float | None = None


def of(
    task_cost: float | None,
    task_tokens: int | None,
    default_cost: float | None,
    default_tokens: float | None,
    daily: Mapping[str, float],
    board: str,
) -> Budget:
    """The budget of a task of ``board``: its own limits, else the defaults."""
    cost = task_cost if task_cost is not None else default_cost
    tokens = task_tokens if task_tokens is not None else default_tokens
    return Budget(
        max_cost_usd=cost,
        max_tokens=None if tokens is None else int(tokens),
        daily_usd=daily_budget(daily, board),
    )


def daily_budget(daily: Mapping[str, float], board: str) -> float | None:
    return daily.get(board, daily.get("*"))


def crossed(budget: Budget, task: Totals, day: Totals) -> str | None:
    """Why the spend so far is past a limit, in words naming the spend; None: within."""
    if budget.max_cost_usd is not None and task.cost_usd >= budget.max_cost_usd:
        return (f"the task's budget of ${budget.max_cost_usd:.4f} is spent: "
                f"{describe(task)} so far")
    if budget.max_tokens is not None and task.total_tokens >= budget.max_tokens:
        return (f"the task's budget of {budget.max_tokens} tokens is spent: "
                f"{describe(task)} so far")
    if budget.daily_usd is not None and day.cost_usd >= budget.daily_usd:
        return (f"the board's daily budget of ${budget.daily_usd:.4f} is spent: "
                f"${day.cost_usd:.4f} today")
    return None


def spent_reason(why: str, answered: bool) -> str:
    """The block reason of a run whose spend crossed its budget (``why``, from
    ``crossed``). A run past its budget is blocked even when the worker had answered
    (README: budgets): the answer is not delivered past the limit the operator set, but
    kept in the worktree and the session, for ``task retry`` once the budget is raised."""
    kept = ("; the worker had answered: its work stays in the worktree for 'task retry' "
            "after the budget is raised") if answered else ""
    return f"budget spent: {why}{kept}"


def board_spent(daily: Mapping[str, float], board: str, day: Totals) -> str | None:
    """Why nothing more is claimed on ``board`` today, or None."""
    limit = daily_budget(daily, board)
    if limit is None or day.cost_usd < limit:
        return None
    return f"daily budget ${limit:.4f} spent (${day.cost_usd:.4f} today, UTC)"


def dollars_left(budget: Budget, task: Totals, day: Totals) -> float | None:
    """What the task may still spend in dollars (the smaller of its own and the board's
    day's), for a CLI that stops itself at a budget; None: no dollar limit."""
    left = [
        limit - spent
        for limit, spent in (
            (budget.max_cost_usd, task.cost_usd),
            (budget.daily_usd, day.cost_usd),
        )
        if limit is not None
    ]
    return max(0.0, min(left)) if left else None


def describe(totals: Totals) -> str:
    """``$0.0123 and 4,500 tokens`` (with the unpriced part said)."""
    unknown = f" (+{totals.unpriced} unpriced)" if totals.unpriced else ""
    return f"${totals.cost_usd:.4f}{unknown} and {totals.total_tokens:,} tokens"
