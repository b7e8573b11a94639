"""What each task spent, as the real CLIs report it, counted once across a ``kill -9`` and a
resume (issue 30): ``task show --json`` and ``lane-runner usage --json`` give what the
scripted server sent (see conftest.py for the set-up)."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from lane_runner.board.model import Status
from tests.harness import BOARD, hold_commit

from .conftest import ModelServer, RealLane, answer, marker

pytestmark = pytest.mark.timeout(600)

#: codex's model on cli-codex-low (the static policy's default), priced for the test.
CODEX_MODEL = "gpt-5.1-codex-mini"
PRICES = {CODEX_MODEL: {"input": 0.25, "cached_input": 0.025, "output": 2.0}}


def sent(server: ModelServer, name: str, provider: str) -> dict[str, int]:
    """What the server's whole answers reported, as the ledger's kinds."""
    total = {"input": 0, "cached_input": 0, "cache_write": 0, "output": 0}
    for request in server.requests(name, provider):
        usage = request["usage"]
        if usage is None:
            continue
        if provider == "codex":
            cached = usage["input_tokens_details"]["cached_tokens"]
            total["input"] += usage["input_tokens"] - cached
            total["cached_input"] += cached
        else:
            total["input"] += usage["input_tokens"]
            total["cached_input"] += usage["cache_read_input_tokens"]
            total["cache_write"] += usage["cache_creation_input_tokens"]
        total["output"] += usage["output_tokens"]
    return total


def reported(lane: RealLane, task_id: str) -> dict[str, Any]:
    """The task's usage as ``task show --json`` gives it, checked equal to ``usage --json``."""
    shown = lane.cli("task", "show", "--board", BOARD, task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    usage = json.loads(shown.stdout)["usage"]
    listed = lane.cli("usage", "--board", BOARD, "--task", task_id, "--by", "task", "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    [row] = document["rows"]
    for key in ("tokens", "total_tokens", "cost_usd", "cost_complete"):
        assert row[key] == usage[key] == document["total"][key], key
    return usage  # type: ignore[no-any-return]


def counted(usage: dict[str, Any]) -> dict[str, int]:
    return {kind: usage["tokens"][kind]
            for kind in ("input", "cached_input", "cache_write", "output")}


def codex_cost(tokens: dict[str, int]) -> float:
    price = PRICES[CODEX_MODEL]
    return (tokens["input"] * price["input"] + tokens["cached_input"] * price["cached_input"]
            + tokens["output"] * price["output"]) / 1e6


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_usage_across_a_kill_9_between_tool_calls_is_counted_once(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The daemon dies while the model is asked for the second tool call; the resumed
    session carries on. codex's thread total includes the killed exec's turn, so the
    ledger holds exactly what the server sent. claude's session total after the kill no
    longer includes the killed invocation's response: the ledger keeps that response's
    input as claude's stream showed it, but claude never said its final output count
    (a streamed message shows the count the response began with, which the next
    session total covers), so those 40 output tokens are all that is missing."""
    real_lane.write_config(prices=PRICES)
    name = marker(f"usage-resume-{provider}")
    model_server.script(name, **{provider: [
        {"shell": "echo one > one.txt", "usage": {"input": 1200, "cached": 200,
                                                  "cache_read": 200, "output": 40}},
        {"attempts": [{"hang": True}, {"shell": "echo two > two.txt"}]},
        {"answer": answer("made one.txt and two.txt", ["one.txt", "two.txt"])},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    daemon = real_lane.start()
    real_lane.wait_for(lambda: any(r["turn"] == 1 for r in model_server.requests(name)),
                       120, "the CLI to ask for its second tool call")
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    assert real_lane.board.get_task(task.id).status is Status.DONE, real_lane.task_log(task.id)
    usage = reported(real_lane, task.id)
    server = sent(model_server, name, provider)
    if provider == "codex":
        assert counted(usage) == server
        assert usage["cost_usd"] == pytest.approx(codex_cost(server), abs=1e-6)
    else:
        unsaid = 40  # the killed invocation's first response's output: never reported
        assert counted(usage) == {**server, "output": server["output"] - unsaid}
        assert usage["cost_usd"] > 0  # claude's own figure for what its total holds
    assert usage["cost_complete"] is (provider == "codex")  # the killed response: no price


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_usage_across_a_kill_9_after_the_answer_is_counted_once(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The daemon dies after the CLI's answer, while the runner commits it (a test's hold
    on the runner's commit keeps it there); the next start delivers it without
    a provider. The ledger was written as the CLI reported: exactly what the server sent,
    nothing counted twice, and the board's completed event carries the same totals."""
    assert real_lane.scratch is not None
    real_lane.write_config(prices=PRICES)
    held = real_lane.scratch.path("commit-held")
    release = real_lane.scratch.path("commit-release")
    real_lane.extra_env.update(hold_commit(held, release))
    name = marker(f"usage-deliver-{provider}")
    model_server.script(name, **{provider: [
        {"shell": "echo delivered > delivered.txt", "usage": {"input": 900, "output": 70}},
        {"answer": answer("made delivered.txt", ["delivered.txt"]),
         "usage": {"input": 2100, "cached": 600, "cache_read": 600, "output": 30}},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    daemon = real_lane.start()
    real_lane.wait_for(held.exists, 240, "the runner's commit")
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    release.touch()
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    assert real_lane.board.get_task(task.id).status is Status.DONE, real_lane.task_log(task.id)
    usage = reported(real_lane, task.id)
    server = sent(model_server, name, provider)
    assert counted(usage) == server
    assert usage["cost_complete"] is True
    if provider == "codex":
        assert usage["cost_usd"] == pytest.approx(codex_cost(server), abs=1e-6)
    [completed] = [e.data for e in real_lane.board.events(task.id) if e.kind == "completed"]
    on_board = completed["metadata"]["usage"]["task"]
    assert on_board["tokens"] == usage["tokens"] and on_board["cost_usd"] == usage["cost_usd"]
