"""The spend view (``usage/spend.py``): the board's copy and the home's records merged
once, and the totals every budget and report reads from it."""

from __future__ import annotations

from dataclasses import replace

from lane_runner.usage.record import Record, day_of
from lane_runner.usage.spend import Spend

DAY = 86_400.0
NOW = 20 * DAY + 3_600.0


def spent(record_id: str, task: str, run: int, at: float, dollars: float | None) -> Record:
    return Record(
        id=record_id, at=at, day=day_of(at), board="work", task_id=task, run_id=run,
        attempt=1, provider="codex", model="gpt-5", session="th", basis="cumulative",
        tokens={"input": 100, "cached_input": 0, "cache_write": 0, "output": 10,
                "reasoning": 0},
        cost_usd=dollars, cost_source=None if dollars is None else "prices",
    )


def test_a_record_both_copies_hold_counts_once_and_one_only_the_home_holds_counts() -> None:
    """Mutations: the copies concatenated (a record counted twice); the home's records
    left out (one not sent yet would not count); the task, run or day views filtering
    on another field."""
    today = spent("a", "t1", 1, NOW, 1.0)
    yesterday = spent("b", "t1", 2, NOW - DAY, 2.0)
    unsent = spent("c", "t2", 3, NOW, None)
    spend = Spend.of([today, yesterday], [replace(today, cost_usd=9.0), unsent])
    assert [r.id for r in spend.records] == ["a", "b", "c"]
    assert spend.records[0].cost_usd == 1.0  # the board's copy is the one counted
    task = spend.task("t1")
    assert (task.records, task.cost_usd, task.tokens["input"]) == (2, 3.0, 200)
    assert spend.run(3).records == 1 and spend.run(3).unpriced == 1
    day = spend.on_day(NOW)
    assert (day.records, day.cost_usd, day.unpriced) == (2, 1.0, 1)
    usage = spend.task_usage("t1")
    assert [row["run"] for row in usage["by_run"]] == [1, 2]
    assert usage["total_tokens"] == 220 and usage["cost_complete"] is True
