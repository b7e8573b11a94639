"""A Hermes task's own model and skills (issue 42): ``model_override`` reaches the CLI
that runs when it runs that model, else the run's comment says why not; ``skills``
are named in the prompt and the comment. Never silently ignored."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from lane_runner.board.hermes.store import HermesStore
from lane_runner.router import Route
from lane_runner.run import plan
from lane_runner.run.pin import Asked, pin, prompt_section
from tests.hermes.conftest import HermesLane

ROUTED = Route("codex", "gpt-5.4-mini", "low", "p", "static", "the lane says", 0)


def test_a_model_the_cli_runs_replaces_the_routers_and_one_it_does_not_is_said() -> None:
    pinned = pin(ROUTED, Asked("gpt-5.5"))
    assert pinned.route.model == "gpt-5.5" and pinned.route.provider == "codex"
    assert pinned.said == ("model gpt-5.5: pinned by the task, given to codex",)
    other = pin(ROUTED, Asked("claude-opus-4-1", ("review",)))
    assert other.route == ROUTED  # never handed to a CLI that would fail on it
    assert "claude-opus-4-1 pinned by the task was not used" in other.said[0]
    assert "codex/gpt-5.4-mini ran" in other.said[0]
    assert other.said[1].startswith("skills review: codex has no way to load")
    assert pin(ROUTED, Asked()).said == ()
    assert "review, tdd" in prompt_section(Asked(skills=("review", "tdd")))
    assert prompt_section(Asked()) == ""


def _pin(hermes_lane: HermesLane, task_id: str, model: str, skills: list[str]) -> None:
    """What Hermes's dashboard and API write: ``model_override`` and ``skills`` on the task."""
    with closing(sqlite3.connect(hermes_lane.hermes.path / "kanban.db")) as db, db:
        db.execute(
            "UPDATE tasks SET model_override = ?, skills = ? WHERE id = ?",
            (model, json.dumps(skills), task_id),
        )


def test_hermes_model_override_and_skills_reach_the_run(
    hermes_lane: HermesLane, monkeypatch: pytest.MonkeyPatch
) -> None:
    hermes = hermes_lane.hermes
    known = hermes.create("pinned", "--assignee", "cli-codex-low", "--body", "do it")
    unknown = hermes.create("pinned elsewhere", "--assignee", "cli-codex-low", "--body", "do it")
    _pin(hermes_lane, known, "gpt-5.5", ["tdd"])
    _pin(hermes_lane, unknown, "claude-opus-4-1", [])

    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes.path))
    board = HermesStore(f"hermes://{hermes.path}").board("default")
    task = board.get_task(known)
    assert (task.settings.model, task.skills) == ("gpt-5.5", ("tdd",))
    assert "The task asks for these skills: tdd" in plan.task_context(board, task)

    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes.statuses([known, unknown]) == {known: "done", unknown: "done"}
    with closing(hermes.db()) as db:
        def route_of(task_id: str) -> dict[str, str]:
            (row,) = db.execute(
                "SELECT metadata FROM task_runs WHERE task_id = ? AND outcome = 'completed'",
                (task_id,),
            ).fetchall()
            found: dict[str, str] = json.loads(row["metadata"])["lane_runner"]["route"]
            return found

        assert route_of(known)["model"] == "gpt-5.5"
        assert route_of(unknown)["model"] != "claude-opus-4-1"

    def comments(task_id: str) -> str:
        shown = json.loads(hermes.hermes("show", task_id, "--json"))
        return "\n".join(c["body"] for c in shown["comments"])

    assert "route: codex/gpt-5.5" in comments(known)
    assert "skills tdd: codex has no way to load a named skill" in comments(known)
    assert "model claude-opus-4-1 pinned by the task was not used" in comments(unknown)
