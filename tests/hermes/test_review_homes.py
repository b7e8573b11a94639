"""A review served by a runner that did not implement the task, on the real hermes-agent
package (issue 42): two runner homes on one Hermes home, the first implementing (its
column left alone), the second reviewing. The second has no lane state of the task: the
implementer's provider and base come from what Hermes keeps on the completed run
(``ReviewColumn.implemented``), so it still asks another provider and shows the change."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from lane_runner.board.hermes.store import HermesStore
from lane_runner.board.model import Implemented
from lane_runner.service.leftovers import find as find_workers
from tests.hermes.conftest import HermesLane, repository


@pytest.fixture
def second(hermes_lane: HermesLane, tmp_path: Path) -> Iterator[HermesLane]:
    """Another runner's home on the same Hermes home."""
    lane = HermesLane(tmp_path / "runner-b", hermes_lane.hermes)
    yield lane
    lane.stop_all()
    for pid in find_workers(lane.home.node_id()):
        subprocess.run(["kill", "-9", str(pid)], check=False)


def test_a_review_in_another_home_asks_another_provider_and_shows_the_change(
    hermes_lane: HermesLane, second: HermesLane, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    task_id = hermes.create(
        "fix the parser", "--assignee", "cli-codex-low", "--skill", "review",
        "--body", "[sim:artifacts]", "--workspace", f"worktree:{repo}",
    )
    hermes_lane.write_config(review="off")  # the implementing runner leaves the column
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes.statuses([task_id]) == {task_id: "review"}

    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes.path))
    with closing(HermesStore(f"hermes://{hermes.path}")) as store:
        board = store.board("default")
        assert board.implemented(task_id) == Implemented("codex", "low", base)
        assert board.implemented(hermes.create("never run", "--assignee", "cli-codex-low")) is None

    assert second.start("--until-idle").wait(timeout=300) == 0
    assert hermes.statuses([task_id]) == {task_id: "done"}
    state = json.loads((second.home.lane_dir("default") / f"{task_id}.json").read_text())
    assert [(a["role"], a["provider"]) for a in state["attempts"]] == [("review", "claude")]
    shown = json.loads(hermes.hermes("show", task_id, "--json"))
    said = [c["body"] for c in shown["comments"] if "review by claude/" in c["body"]]
    assert len(said) == 1
    assert f"since {base[:12]}" in said[0] and "file" in said[0]
