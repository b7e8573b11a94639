"""Two pods (homes) on one PostgreSQL board count their spend together through the
board's shared usage ledger (issue 30): a task's budget across pods, the board's daily
budget, and ``usage`` / ``task show`` / ``status`` from either pod. The simulated codex
spends 1,200 input and 80 output tokens a turn, ``TURN`` dollars at ``PRICES``."""

from __future__ import annotations

import json

import pytest

from lane_runner.board.model import BlockKind, NewTask, Status, Task

from .conftest import BOARD, WORKSPACE, Fleet, Pod

PRICES = {"gpt-5.1-codex-mini": {"input": 0.25, "output": 2.0}}
TURN = (1200 * 0.25 + 80 * 2.0) / 1e6


def add(fleet: Fleet, title: str, body: str = "", **extra: object) -> Task:
    new = NewTask(title=title, body=body, workspace=WORKSPACE, assignee="cli-codex-low",
                  **extra)  # type: ignore[arg-type]
    return fleet.board.add_task(new)


def spent_by(pod: Pod, *args: str) -> dict[str, object]:
    shown = pod.cli(*args, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)  # type: ignore[no-any-return]


def test_a_task_retried_on_another_pod_is_blocked_once_both_spends_cross_its_budget(
    fleet: Fleet,
) -> None:
    """Pod A spends one turn (within the budget of one and a half) and the worker stops,
    blocked; retried, pod B spends a second turn: B counts A's too and blocks ``budget``.
    Each pod's ``usage`` and ``task show`` show both turns."""
    first, second = fleet.pod("pod-a"), fleet.pod("pod-b")
    for pod in (first, second):
        pod.write_config(prices=PRICES)
    task = add(fleet, "stuck", "[sim:blocked] cannot go on", max_cost_usd=1.5 * TURN)
    assert first.start("--until-idle").wait(timeout=120) == 4, first.log_tail()  # blocked
    stopped = fleet.board.get_task(task.id)
    assert stopped.status is Status.BLOCKED and stopped.block_kind is not BlockKind.BUDGET
    fleet.board.retry(task.id, "try again")
    assert second.start("--until-idle").wait(timeout=120) == 4, second.log_tail()  # budget
    blocked = fleet.board.get_task(task.id)
    assert blocked.block_kind is BlockKind.BUDGET, blocked
    assert f"${2 * TURN:.4f} and 2,560 tokens so far" in (blocked.block_reason or "")
    for pod in (first, second):
        usage = spent_by(pod, "usage", "--by", "task")
        assert usage["total"]["records"] == 2, (pod.root.name, usage)  # type: ignore[index]
        assert usage["total"]["cost_usd"] == pytest.approx(2 * TURN)  # type: ignore[index]
        shown = spent_by(pod, "task", "show", task.id)["usage"]
        assert shown["total_tokens"] == 2 * 1280 and len(shown["by_run"]) == 2  # type: ignore[index]


def test_the_boards_daily_budget_counts_every_pods_spend(fleet: Fleet) -> None:
    """A daily budget of one and a half turns: pod A spends one; pod B may start one more
    (one turn is under the budget), whose turn crosses it (that task is blocked
    ``budget``), and, counting A's, claims nothing after it; pod A's status shows the
    day's spend of both."""
    first, second = fleet.pod("pod-a"), fleet.pod("pod-b")
    for pod in (first, second):
        pod.write_config(prices=PRICES, daily_budget_usd={BOARD: 1.5 * TURN}, concurrency=1)
    one = add(fleet, "one")
    assert first.start("--until-idle").wait(timeout=120) == 0, first.log_tail()
    assert fleet.board.get_task(one.id).status is Status.DONE
    later = [add(fleet, "two"), add(fleet, "three")]
    second.start()

    def held() -> bool:
        status = spent_by(second, "status")
        return (status["daemon"]["hold"] or {}).get("kind") == "budget"  # type: ignore[index]
    fleet.wait(held, 120, "pod-b to hold its claims for the board's daily budget")
    statuses = sorted(fleet.board.get_task(task.id).status.value for task in later)
    assert statuses == ["blocked", "ready"], statuses
    for pod in (first, second):
        board = spent_by(pod, "status")["boards"][BOARD]  # type: ignore[index]
        assert board["budget"]["spent_usd"] == pytest.approx(2 * TURN), pod.root.name
        assert "daily budget" in board["budget"]["spent"]
