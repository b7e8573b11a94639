"""A review of our lanes whose runner died, on the real hermes-agent package (issue 42):
Hermes's own dispatcher reclaims any expired claim to ``ready``, a review run's too; the
runner puts such a task back in ``review`` instead of running its implementer again over
a result that was accepted and committed."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest

from lane_runner.board.hermes.store import HermesStore
from tests.hermes.conftest import HermesHome, HermesLane, repository


def expire_claim(hermes: HermesHome, task_id: str) -> None:
    """The claim's time runs out (its runner died an hour ago): written into Hermes's
    database as the clock would leave it, so Hermes's dispatcher finds it stale."""
    with closing(sqlite3.connect(hermes.path / "kanban.db")) as db, db:
        db.execute("UPDATE tasks SET claim_expires = ? WHERE id = ?",
                   (int(time.time()) - 3600, task_id))


def events(hermes: HermesHome, task_id: str) -> list[str]:
    with closing(hermes.db()) as db:
        return [row[0] for row in db.execute(
            "SELECT kind FROM task_events WHERE task_id = ? ORDER BY id", (task_id,))]


def test_a_review_hermes_reclaimed_to_ready_is_reviewed_not_implemented_again(
    hermes_lane: HermesLane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hermes = hermes_lane.hermes
    hermes_lane.write_config(review="off")  # the implementer's batch leaves the column
    repo = repository(tmp_path / "repo")
    task_id = hermes.create(
        "fix the parser", "--assignee", "cli-codex-low", "--skill", "review",
        "--body", "do it", "--workspace", f"dir:{repo}",
    )
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes.statuses([task_id]) == {task_id: "review"}

    # A reviewer claims the review and dies; Hermes's dispatcher reclaims it to ready.
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes.path))
    with closing(HermesStore(f"hermes://{hermes.path}")) as store:
        assert store.board("default").claim_review("a-node-that-died", 60) is not None
    expire_claim(hermes, task_id)
    hermes.hermes("dispatch")
    assert hermes.statuses([task_id]) == {task_id: "ready"}

    del hermes_lane.config["review"]
    hermes_lane.write_config()  # the column served again (``auto``)
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0

    assert hermes.statuses([task_id]) == {task_id: "done"}
    assert events(hermes, task_id).count("review_restored") == 1
    with closing(hermes.db()) as db:
        outcomes = [row[0] for row in db.execute(
            "SELECT outcome FROM task_runs WHERE task_id = ? ORDER BY id", (task_id,))]
    assert outcomes == ["completed", "reclaimed", "completed"]
    state = json.loads((hermes_lane.home.lane_dir("default") / f"{task_id}.json").read_text())
    roles = [(a["role"], a["provider"]) for a in state["attempts"]]
    assert roles == [("implement", "codex"), ("review", "claude")]  # implemented once
    commits = subprocess.run(
        ["git", "log", "--format=%H", f"--grep=^Lane-Task: default/{task_id}$",
         f"lane/default/{task_id}"],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert len(commits) == 1


def test_a_runner_that_leaves_the_column_alone_still_restores_a_reclaimed_review(
    hermes_lane: HermesLane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``review = "off"`` the runner serves no review, yet a review Hermes reclaimed
    to ready is not its implementer's work: it goes back to ``review`` for whoever reviews
    there, and the implementer does not run again."""
    hermes = hermes_lane.hermes
    hermes_lane.write_config(review="off")
    task_id = hermes.create("t", "--assignee", "cli-codex-low", "--skill", "review",
                            "--body", "do it")
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes.path))
    with closing(HermesStore(f"hermes://{hermes.path}")) as store:
        assert store.board("default").claim_review("a-node-that-died", 60) is not None
    expire_claim(hermes, task_id)
    hermes.hermes("dispatch")
    assert hermes.statuses([task_id]) == {task_id: "ready"}

    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes.statuses([task_id]) == {task_id: "review"}
    assert events(hermes, task_id).count("review_restored") == 1
    state = json.loads((hermes_lane.home.lane_dir("default") / f"{task_id}.json").read_text())
    assert [a["role"] for a in state["attempts"]] == ["implement"]
