"""What the model answers, through the real CLIs: the runner's rules on answers hold for what a
real CLI hands over, not only for the simulators' (goal turns, blocked, unfinished work,
artifacts, a NUL, leftovers of a tool, a CLI killed by its own tool)."""

from __future__ import annotations

from typing import Any

import pytest

from lane_runner.board.model import Outcome, Status

from .conftest import ModelServer, RealLane, answer, marker

pytestmark = pytest.mark.timeout(600)


def test_the_answers_real_clis_hand_over_are_judged_as_the_readme_says(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    tasks: dict[str, Any] = {}

    def add(key: str, provider: str, steps: list[dict[str, Any]], **extra: Any) -> str:
        name = marker(key)
        model_server.script(name, **{provider: steps})
        tasks[key] = real_lane.add(name, assignee=f"cli-{provider}-low", **extra)
        return name

    goal = add("goal", "codex", [{"attempts": [
        {"answer": answer("turn 1: parser done; TODO: the CLI flag", status="incomplete")},
        {"answer": answer("parser and flag done", ["flag.txt"])}]}], goal_turns=2)
    add("blocked", "claude", [{"answer": answer(
        "cannot go on", status="blocked", blockers=["the staging API key is not in the vault"])}])
    add("unfinished", "claude", [{"answer": answer("wired the parser; TODO: the CLI flag")}])
    add("artifacts", "codex", [{"shell": "echo findings > report.txt"}, {"answer": answer(
        "wrote the report", ["report.txt"], findings=["a NUL\u0000 in a finding"],
        artifacts=["report.txt", "/etc/passwd", "../outside.txt", "missing.txt"])}])
    add("leftovers", "claude", [
        {"shell": "setsid sleep 600 > /dev/null 2>&1 < /dev/null &"},
        {"answer": answer("started a server and answered")}])
    killed = add("killed", "codex", [
        {"attempts": [{"shell": "kill -9 $PPID"}, {"answer": answer("done the second time")}]},
        {"answer": answer("done the second time")}])
    assert real_lane.start("--until-idle").wait(timeout=400) == 4  # two end blocked
    task = {key: real_lane.board.get_task(found.id) for key, found in tasks.items()}

    # goal mode: the incomplete turn is continued in the same codex thread, with the reason
    assert task["goal"].status is Status.DONE and task["goal"].summary == "parser and flag done"
    turns = model_server.requests(goal, "codex")
    assert len({r["session"] for r in turns}) == 1, "both goal turns in one thread"
    assert "not accepted" in str(turns[-1]["body"]["input"][-1])
    # the worker's own blocker blocks for a person; a completed answer admitting work
    # left is not done
    assert task["blocked"].status is Status.BLOCKED
    assert task["blocked"].block_kind is not None and task["blocked"].block_kind.value == (
        "needs_input")
    assert "the staging API key is not in the vault" in (task["blocked"].block_reason or "")
    assert task["unfinished"].status is Status.BLOCKED
    assert "not done after 1 turn" in (task["unfinished"].block_reason or "")
    # only real files of the worktree are kept as artifacts; a NUL (models do emit \u0000)
    # is stored as every board can keep it
    assert task["artifacts"].status is Status.DONE
    assert task["artifacts"].result is not None
    assert task["artifacts"].result["artifacts"] == ["report.txt"]
    assert task["artifacts"].result["findings"][0].startswith("a NUL")
    # what a tool left running dies with the attempt (the scratch fixture checks no
    # process carrying this test's mark survives)
    assert task["leftovers"].status is Status.DONE
    assert real_lane.live_workers() == []
    # a CLI killed under the runner by its own tool: a counted failure, then a new attempt
    assert task["killed"].status is Status.DONE
    outcomes = [run.outcome for run in real_lane.runs(task["killed"].id)]
    assert outcomes[0] is Outcome.FAILED and outcomes[-1] is Outcome.COMPLETED
    assert len(model_server.requests(killed, "codex")) >= 2
