"""Budgets and usage limits through the daemon with the simulated CLIs: a board whose
daily budget is spent is not claimed from (and status says so), and a limit that names
its reset parks the task until then, uncounted. The real CLIs show the same in
tests/realrun/test_limits.py; the board gate needs no CLI of its own."""

from __future__ import annotations

import json
import time

from lane_runner.board.model import BlockKind, Status
from lane_runner.router import health
from tests.harness import BOARD, Lane

#: The simulated codex reports 1,200 input and 80 output tokens a turn (cli-codex-low's
#: model under the static policy), priced here at $0.00046 a turn.
PRICES = {"gpt-5.1-codex-mini": {"input": 0.25, "output": 2.0}}


def test_a_board_whose_daily_budget_is_spent_is_not_claimed_from(lane: Lane) -> None:
    lane.write_config(prices=PRICES, daily_budget_usd={BOARD: 0.0004})
    first = lane.add("first", assignee="cli-codex-low")
    assert lane.start("--until-idle").wait(timeout=120) == 4  # its task ends blocked budget
    crossed = lane.board.get_task(first.id)  # its one turn crossed the day's budget
    assert (crossed.status, crossed.block_kind) == (Status.BLOCKED, BlockKind.BUDGET), crossed
    second = lane.add("second", assignee="cli-codex-low")
    daemon = lane.start()

    def held() -> bool:
        shown = json.loads(lane.cli("status", "--json").stdout)
        return (shown["daemon"]["hold"] or {}).get("kind") == "budget"
    lane.wait(held, 60, "the daemon to hold its claims for the budget")
    assert lane.board.get_task(second.id).status is Status.READY
    shown = json.loads(lane.cli("status", "--json").stdout)
    spent = shown["boards"][BOARD]["budget"]
    assert spent["daily_usd"] == 0.0004 and spent["spent_usd"] >= 0.0004
    assert "daily budget $0.0004 spent" in spent["spent"]
    assert "not claiming: daily budget" in lane.cli("status").stdout
    today = shown["boards"][BOARD]["usage_today"]
    assert today["cost_usd"] == spent["spent_usd"] and today["total_tokens"] == 1280
    usage = json.loads(lane.cli("usage", "--by", "day", "--json").stdout)
    assert usage["total"]["cost_usd"] == spent["spent_usd"]
    daemon.terminate()
    daemon.wait(timeout=60)


def test_a_task_budget_from_task_add_is_kept_and_checked(lane: Lane) -> None:
    added = lane.cli("task", "add", "--board", BOARD, "--title", "t", "--workspace", "repo",
                     "--max-cost-usd", "0.25",
                     "--max-tokens", "5000", "--json")
    assert added.returncode == 0, added.stderr
    task = json.loads(added.stdout)
    assert (task["max_cost_usd"], task["max_tokens"]) == (0.25, 5000)
    refused = lane.cli("task", "add", "--board", BOARD, "--title", "t", "--max-cost-usd", "0")
    assert refused.returncode == 2 and "--max-cost-usd" in refused.stderr
    refused = lane.cli("task", "add", "--board", BOARD, "--title", "t", "--max-tokens", "-5")
    assert refused.returncode == 2 and "--max-tokens" in refused.stderr


def test_when_every_provider_names_its_reset_the_task_waits_for_the_first(lane: Lane) -> None:
    """Both simulated CLIs the task tries hit a usage limit naming its reset (claude in two
    hours, opencode, the next installed, in three), and the other two are under limits
    already: the task is ready again at claude's reset, with no failure and no cooldown
    counted, and status names the limits."""
    lane.write_config(cooldown_limit=1)  # a cooldown would block the task at once
    for other in ("codex", "gemini"):  # limited until later, by earlier tasks
        health.record_limit(lane.home.provider_health, other, "usage limit", time.time() + 14400,
                            time.time())
    task = lane.add("[sim@claude:capacity:7200] [sim@opencode:capacity:10800]",
                    assignee="cli-claude-low")
    assert lane.start("--until-idle").wait(timeout=120) == 3  # left waiting for the reset
    parked = lane.board.get_task(task.id)
    assert parked.status is Status.READY and parked.failure_count == 0
    assert parked.next_attempt_at is not None
    assert abs(parked.next_attempt_at - (time.time() + 7200)) < 120
    assert lane.lane_state(task.id)["cooldowns"] == 0
    text = lane.cli("status").stdout
    assert "claude: usage limit until" in text and "opencode: usage limit until" in text, text


def test_usage_rejects_bad_periods(lane: Lane) -> None:
    for args, said in [(("--since", "yesterday"), "--since 'yesterday'"),
                       (("--since", "2026-12-02", "--until", "2026-12-01"), "is after"),
                       (("--task", "t1"), "--task needs --board")]:
        done = lane.cli("usage", *args)
        assert done.returncode == 2 and said in done.stderr, done.stderr
    empty = json.loads(lane.cli("usage", "--since", "7d", "--json").stdout)
    assert empty["rows"] == [] and empty["total"]["total_tokens"] == 0


def test_a_task_blocked_for_its_budget_runs_again_once_the_budget_is_raised(lane: Lane) -> None:
    """The simulated codex spends 1,280 tokens a turn; a goal task allowed 1,000 is blocked
    ``budget`` after its first turn (no second turn); raised with ``task edit`` and
    retried, it works its turns (and ends for its own reason)."""
    task = lane.add("[sim:incomplete] more to do", assignee="cli-codex-low", goal_turns=2,
                    max_tokens=1000)
    assert lane.start("--until-idle").wait(timeout=120) == 4  # blocked: budget
    blocked = lane.board.get_task(task.id)
    assert blocked.block_kind is BlockKind.BUDGET, blocked
    assert "budget of 1000 tokens is spent: $0.0000 (+1 unpriced) and 1,280 tokens" in (
        blocked.block_reason or "")
    raised = lane.cli("task", "edit", task.id, "--max-tokens", "100000")
    assert raised.returncode == 0, raised.stderr
    assert lane.cli("task", "retry", task.id).returncode == 0
    assert lane.start("--until-idle").wait(timeout=120) == 4  # blocked: needs input
    again = lane.board.get_task(task.id)
    assert again.status is Status.BLOCKED and again.block_kind is BlockKind.NEEDS_INPUT, again
    spent = json.loads(lane.cli("task", "show", task.id, "--json").stdout)["usage"]
    assert spent["total_tokens"] == 3 * 1280 and spent["cost_complete"] is False
