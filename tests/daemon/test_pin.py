"""Our own boards' model pin (``task add --model``, ``TaskSettings.model``) reaches the
run as Hermes's ``model_override`` does (issue 42, ``run/pin.py``)."""

from __future__ import annotations

from lane_runner.board.model import TaskSettings
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import Services
from tests.daemon.test_executor import claim, services  # noqa: F401 - the fixture
from tests.harness import Lane


def test_a_pinned_model_is_the_runs_and_a_foreign_one_is_said(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    task = lane.add("pinned", assignee="cli-codex-low", settings=TaskSettings(model="gpt-5.5"))
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    [event] = [e for e in lane.board.events(task.id) if e.kind == "completed"]
    assert event.data["metadata"]["route"]["model"] == "gpt-5.5"
    said = [c.body for c in lane.board.comments(task.id)]
    assert "model gpt-5.5: pinned by the task, given to codex" in said

    other = lane.add("foreign", assignee="cli-codex-low",
                     settings=TaskSettings(model="claude-opus-4-1"))
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    [event] = [e for e in lane.board.events(other.id) if e.kind == "completed"]
    assert event.data["metadata"]["route"]["model"] != "claude-opus-4-1"
    said = [c.body for c in lane.board.comments(other.id)]
    assert any("model claude-opus-4-1 pinned by the task was not used" in s for s in said)
