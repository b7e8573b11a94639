"""What each Hermes workspace kind means for a lane, through the daemon and the real
hermes-agent package: where the CLI works, where its artifacts and its log end up
(docs/ARCHITECTURE.md §5)."""

from __future__ import annotations

import json
import subprocess
from contextlib import closing
from pathlib import Path

from lane_runner.run import taskgit
from tests.harness import git
from tests.hermes.conftest import HermesHome, HermesLane, repository


def completed_metadata(hermes_lane: HermesLane, task_id: str) -> dict[str, object]:
    with closing(hermes_lane.hermes.db()) as db:
        (row,) = db.execute(
            "SELECT metadata FROM task_runs WHERE task_id = ? AND outcome = 'completed'",
            (task_id,),
        ).fetchall()
    metadata: dict[str, object] = json.loads(row["metadata"])
    return metadata


def place_of(hermes: HermesHome, task_id: str) -> str:
    with closing(hermes.db()) as db:
        return str(
            db.execute("SELECT workspace_path FROM tasks WHERE id = ?", (task_id,)).fetchone()[0]
        )


def test_artifacts_reach_hermes_for_every_workspace_kind(
    hermes_lane: HermesLane, tmp_path: Path
) -> None:
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    kinds = {
        "scratch": [],
        "dir": ["--workspace", f"dir:{repo}"],
        "worktree": ["--workspace", f"worktree:{repo}"],
    }
    ids = {
        kind: hermes.create(
            f"{kind} task", "--assignee", "cli-codex-low", "--body", "[sim:artifacts]", *args
        )
        for kind, args in kinds.items()
    }
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    for kind, task_id in ids.items():
        listed = json.loads(hermes.hermes("attachments", task_id, "--json"))
        assert [a["filename"] for a in listed] == ["sim-output.txt"], kind
        assert Path(listed[0]["stored_path"]).read_text().startswith("turn 1:"), kind
        (artifact,) = completed_metadata(hermes_lane, task_id)["artifacts"]  # type: ignore[misc]
        assert Path(artifact).is_absolute(), kind  # the other three claims were cut
    scratch = json.loads(hermes.hermes("show", ids["scratch"], "--json"))
    assert not Path(scratch["task"]["workspace_path"]).exists()  # Hermes cleaned it after


def test_concurrent_tasks_of_one_repository_never_share_a_checkout(
    hermes_lane: HermesLane, tmp_path: Path
) -> None:
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    (repo / "sub").mkdir()
    (repo / "sub" / "file").write_text("tracked\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "sub", cwd=repo)
    ids = [
        hermes.create(
            f"task {n}",
            "--assignee",
            "cli-codex-low",
            "--body",
            "[sim:slow:0.2:10]",
            "--workspace",
            f"{kind}:{repo}",
        )
        for n, kind in enumerate(["dir", "dir", "worktree", "worktree"])
    ]
    inside = hermes.create("in sub", "--assignee", "cli-auto", "--workspace", f"dir:{repo / 'sub'}")
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    places = [place_of(hermes, task_id) for task_id in ids]
    with closing(hermes.db()) as db:
        overlapped = db.execute(
            "SELECT COUNT(*) FROM task_runs a JOIN task_runs b ON a.id < b.id "
            "WHERE a.started_at < b.ended_at AND b.started_at < a.ended_at"
        ).fetchone()[0]
    assert overlapped > 0  # they did run at the same time
    assert len(set(places)) == 4 and str(repo) not in places
    common = (repo / ".git").resolve()
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=repo, capture_output=True, text=True
    ).stdout
    for place in places[:2]:  # dir: each in its own clone of the repository (run/taskgit.py)
        assert taskgit.repository_of(Path(place)) == common
    for place in places[2:]:  # worktree: each in Hermes's own worktree of it
        assert f"worktree {place}" in listed
    for place in places:
        assert (Path(place) / "sim-output.txt").is_file()
    assert not (repo / "sim-output.txt").exists()  # the user's checkout untouched
    sub = Path(place_of(hermes, inside))
    assert sub.name == "sub" and taskgit.repository_of(sub.parent) == common  # same place
    assert (sub / "sim-output.txt").is_file() and not (repo / "sub" / "sim-output.txt").exists()


def test_hermes_kanban_log_shows_what_the_cli_did(hermes_lane: HermesLane) -> None:
    hermes = hermes_lane.hermes
    task_id = hermes.create("t", "--assignee", "cli-codex-low", "--body", "do it")
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    shown = hermes.hermes("log", task_id)
    assert "thread.started" in shown and "turn.completed" in shown
