"""What a goal turn tells the CLI (issue 46, continuation turns): a resumed session gets
only what is new; a new session, or one told another context, gets everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lane_runner.run import context as contexts
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import Services
from tests.daemon.test_executor import claim, services  # noqa: F401 - the fixture
from tests.harness import Lane

BODY = "Rewrite the parser so it reads the whole file. [sim:goal:2]"


def told_to(codex_home: Path, session: str) -> list[str]:
    """The prompts the simulated codex got in ``session``, as its session store keeps them."""
    saved = json.loads((codex_home / "sim-sessions" / f"{session}.json").read_text())
    return list(saved["prompts"])


def test_a_resumed_goal_turn_is_told_only_what_is_new(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch, tmp_path: Path  # noqa: F811
) -> None:
    """Turn 1 (a new session) gets the task, the rules and the contract; turn 2 resumes it
    and gets the rejection and the contract, not the task again (caught: goal.py handing
    ``worker_prompt`` to every turn, as before)."""
    codex_home = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    task = lane.add("two turns", body=BODY, goal_turns=2, assignee="cli-codex-low")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    state = lane.lane_state(task.id)
    first, second = told_to(codex_home, state["sessions"]["codex"])
    assert BODY in first and contexts.OPERATING_RULES in first
    assert BODY not in second and contexts.OPERATING_RULES not in second
    assert "## Continue\nYour previous answer was not accepted" in second
    assert contexts.RESULT_INSTRUCTIONS in second
    context = first.split("\n\n" + contexts.OPERATING_RULES)[0]
    assert state["told"]["codex"] == contexts.told(context)


PROMPTS = contexts.turn_prompts("# Task b/t-1: x\n\nthe body", "", "checks failed: SIM-FIX: a")


def test_a_session_told_this_context_gets_only_what_is_new() -> None:
    told = contexts.told("# Task b/t-1: x\n\nthe body")
    assert PROMPTS.chosen(True, told) == (PROMPTS.resumed, PROMPTS.whole)
    assert PROMPTS.resumed is not None and "the body" not in PROMPTS.resumed
    assert "checks failed: SIM-FIX: a" in PROMPTS.resumed


@pytest.mark.parametrize(("resume", "told"), [
    (False, contexts.told("# Task b/t-1: x\n\nthe body")),  # a new session
    (True, contexts.told("# Task b/t-1: x\n\nthe body, edited since")),  # context changed
    (True, None),  # a lane state from before the digest was kept
])
def test_any_other_start_gets_the_whole_prompt(resume: bool, told: str | None) -> None:
    """(caught: ``chosen`` ignoring the digest, or the resume flag)"""
    assert PROMPTS.chosen(resume, told) == (PROMPTS.whole, None)
    assert "the body" in PROMPTS.whole and contexts.OPERATING_RULES in PROMPTS.whole


def test_a_resumed_session_with_nothing_new_is_told_to_carry_on() -> None:
    """A restart, or a usage limit that has reset: the session is told why it is asked
    again, not handed an empty turn."""
    assert contexts.CARRY_ON in contexts.resumed_prompt("")
    handed = contexts.resumed_prompt("", "branch t-1 holds two commits")
    assert handed.startswith("## Handoff\nbranch t-1 holds two commits")
