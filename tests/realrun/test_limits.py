"""Budgets that stop a run, and usage limits waited out until the reset the real CLIs name
(issue 30), through the daemon and the pinned CLIs (see conftest.py for the set-up).

The reset is honoured on a clock the test moves (``LANE_RUNNER_SIM_CLOCK_FILE``, read
by the daemon at every reading): the limit is hours away, and the test moves the
daemon's clock past it instead of sleeping.

claude reports a limit with its reset (``rate_limit_event`` with ``resetsAt``, and
"You've hit your 5-hour limit · resets 2:38am (UTC)") only when it runs on a claude.ai
login; with an API key the same 429 is "API Error: Request rejected (429)". So the
limit test runs claude on an OAuth token (``CLAUDE_CODE_OAUTH_TOKEN``, which the
scripted server takes like any key), and the server answers with the
``anthropic-ratelimit-unified-*`` headers the real API sends. codex turns a 429 with
``usage_limit_reached`` and ``resets_at`` into "try again at <time>".
"""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import pytest

from lane_runner.board.model import BlockKind, Status
from tests.harness import BOARD

from .conftest import ModelServer, RealLane, answer, marker

pytestmark = pytest.mark.timeout(600)


def claude_limit(reset: int) -> dict[str, Any]:
    """The 429 Anthropic's API gives a claude.ai login whose 5-hour limit is spent."""
    headers = {
        "x-should-retry": "false",
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(reset),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-status": "rejected",
        "anthropic-ratelimit-unified-5h-reset": str(reset),
    }
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}}
    return {"error": {"status": 429, "headers": headers, "body": body}}


def codex_limit(reset: int) -> dict[str, Any]:
    """The 429 a ChatGPT plan's spent usage limit gets, as codex reads it."""
    error = {"type": "usage_limit_reached", "message": "The usage limit has been reached",
             "plan_type": "plus", "resets_at": reset,
             "resets_in_seconds": max(0, reset - int(time.time()))}
    return {"error": {"status": 429, "body": {"error": error}}}


def reset_words(moment: float, now: float) -> str:
    """A reset as status words it: ``20:00 UTC``, with the day when it is not today's (a
    reset two hours after 22:30 is tomorrow's)."""
    at = datetime.datetime.fromtimestamp(moment, datetime.UTC)
    today = datetime.datetime.fromtimestamp(now, datetime.UTC).date()
    return at.strftime("%H:%M UTC" if at.date() == today else "%Y-%m-%d %H:%M UTC")


def test_a_usage_limit_with_a_reset_parks_the_task_until_then(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """claude says its 5-hour limit resets in two hours; the fallback, codex, says "try
    again at" in three. The task waits for claude's reset: ready, claimable at that
    moment, no failure and no cooldown counted, status naming both limits; once the
    daemon's clock passes the reset, claude is asked again and finishes the task."""
    assert real_lane.scratch is not None
    clock_file = real_lane.scratch.path("clock")
    real_lane.extra_env.update({"ANTHROPIC_API_KEY": "",
                                "LANE_RUNNER_SIM_CLOCK_FILE": str(clock_file)})
    claude_env = dict(real_lane.config["claude_env"])  # type: ignore[call-overload]
    real_lane.write_config(claude_env={**claude_env,
                                       "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-scripted"})
    now = time.time()
    claude_reset, codex_reset = int(now) + 2 * 3600, int(now) + 3 * 3600
    name = marker("limit")
    model_server.script(
        name,
        claude=[{"attempts": [claude_limit(claude_reset), {"shell": "echo after > after.txt"}]},
                {"answer": answer("made after.txt", ["after.txt"])}],
        codex=[codex_limit(codex_reset)],
    )
    task = real_lane.add(name, assignee="cli-claude-low")
    real_lane.start()

    def parked() -> bool:
        found = real_lane.board.get_task(task.id)
        return found.status is Status.READY and found.next_attempt_at is not None
    real_lane.wait_for(parked, 240, "the task to wait for the reset")
    waiting = real_lane.board.get_task(task.id)
    assert waiting.next_attempt_at == pytest.approx(claude_reset, abs=90)
    assert waiting.failure_count == 0
    assert real_lane.lane_state(task.id)["cooldowns"] == 0, "a wait for a reset is no cooldown"
    shown = real_lane.cli("status", "--json")
    assert shown.returncode == 0, shown.stderr
    limits = {p["provider"]: p for p in json.loads(shown.stdout)["providers"]}
    assert limits["claude"]["until"] == claude_reset  # the rate_limit_event's resetsAt
    assert limits["codex"]["until"] == pytest.approx(codex_reset, abs=60)  # "try again at"
    text = real_lane.cli("status").stdout
    assert f"claude: usage limit until {reset_words(claude_reset, now)}" in text, text
    assert f"codex: usage limit until {reset_words(codex_reset, now)}" in text, text
    asked = len(model_server.requests(name, "claude"))

    clock_file.write_text(str(2 * 3600 + 120))  # the daemon's clock passes claude's reset
    real_lane.wait_for(lambda: real_lane.board.get_task(task.id).status is Status.DONE, 240,
                       "the task to be done after the reset")
    done = real_lane.board.get_task(task.id)
    assert done.failure_count == 0 and done.summary == "made after.txt"
    assert len(model_server.requests(name, "claude")) > asked
    assert len(model_server.requests(name, "codex")) >= 1


def test_a_token_budget_crossed_mid_run_ends_the_tree_and_blocks_the_task(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """claude's stream reports each response's input as it comes; the response that takes
    the task past its token budget (the configured default) ends the attempt's process
    tree at once, and the task is blocked ``budget`` with the spend in its reason."""
    real_lane.write_config(max_tokens=2500)
    name = marker("budget-claude")
    model_server.script(name, claude=[
        {"shell": "echo one > one.txt"},
        {"shell": "echo two > two.txt"},
        {"shell": "echo three > three.txt"},
        {"answer": answer("made three files", ["one.txt", "two.txt", "three.txt"])},
    ])
    task = real_lane.add(name, assignee="cli-claude-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 4  # blocked: budget
    blocked = real_lane.board.get_task(task.id)
    assert (blocked.status, blocked.block_kind) == (Status.BLOCKED, BlockKind.BUDGET), (
        blocked, real_lane.task_log(task.id)[-3000:])
    assert "budget of 2500 tokens is spent" in (blocked.block_reason or "")
    assert blocked.failure_count == 0
    turns = {r["turn"] for r in model_server.requests(name, "claude")}
    assert 3 not in turns, "the answer was never asked for: the tree was ended"
    assert real_lane.live_workers() == []
    shown = json.loads(real_lane.cli("task", "show", "--board", BOARD, task.id, "--json").stdout)
    assert shown["usage"]["total_tokens"] >= 2500


def test_a_dollar_budget_given_at_task_add_stops_the_goal_between_turns(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """codex reports its usage when a turn ends; a goal task with its own dollar budget
    (``task add --max-cost-usd``, tests/usage/test_usage_cli.py) whose first turn costs
    more (by the price table) is not given a second turn: blocked ``budget``, with the
    spend."""
    model = "gpt-5.1-codex-mini"
    real_lane.write_config(prices={model: {"input": 0.25, "output": 2.0}})
    name = marker("budget-codex")
    model_server.script(name, codex=[
        {"shell": "echo one > one.txt"},
        {"answer": answer("only one of two files", ["one.txt"], status="incomplete")},
        {"answer": answer("made both", ["one.txt", "two.txt"])},
    ])
    task_id = real_lane.add(name, assignee="cli-codex-low", goal_turns=3,
                            max_cost_usd=0.0005).id
    assert real_lane.start("--until-idle").wait(timeout=300) == 4  # blocked: budget
    blocked = real_lane.board.get_task(task_id)
    assert (blocked.status, blocked.block_kind) == (Status.BLOCKED, BlockKind.BUDGET), (
        blocked, real_lane.task_log(task_id)[-3000:])
    assert "the task's budget of $0.0005 is spent" in (blocked.block_reason or ""), (
        blocked.block_reason)
    assert {r["turn"] for r in model_server.requests(name, "codex")} == {0, 1}
    shown = json.loads(real_lane.cli("task", "show", "--board", BOARD, task_id, "--json").stdout)
    assert shown["usage"]["cost_usd"] == pytest.approx((3000 * 0.25 + 100 * 2.0) / 1e6)


def test_claude_is_given_what_is_left_of_a_dollar_budget_and_stops_itself_there(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """claude's dollars come with its ``result`` only, so a dollar budget is also handed
    to claude (``--max-budget-usd``, what is left of it): the real claude stops after the
    response that reaches it (``error_max_budget_usd``), and the task is blocked
    ``budget`` with claude's own figure."""
    real_lane.write_config(max_cost_usd=0.001)
    name = marker("budget-claude-dollars")
    model_server.script(name, claude=[
        {"shell": "echo one > one.txt"},
        {"shell": "echo two > two.txt"},
        {"answer": answer("made two files", ["one.txt", "two.txt"])},
    ])
    task = real_lane.add(name, assignee="cli-claude-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 4  # blocked: budget
    blocked = real_lane.board.get_task(task.id)
    assert (blocked.status, blocked.block_kind) == (Status.BLOCKED, BlockKind.BUDGET), (
        blocked, real_lane.task_log(task.id)[-3000:])
    assert "--max-budget-usd 0.0010" in real_lane.task_log(task.id)
    assert "the task's budget of $0.0010 is spent" in (blocked.block_reason or "")
    assert blocked.failure_count == 0
    assert 2 not in {r["turn"] for r in model_server.requests(name, "claude")}
