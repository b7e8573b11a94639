"""A Hermes task's work reaches git as on our own boards (issue 42, docs/hermes.md):
a ``worktree`` task's result is committed on the branch Hermes names in Hermes's
worktree, a ``dir:`` task in a repository gets a commit on its task branch in the
runner's worktree of it (the user's checkout left as it was), a ``scratch`` task keeps
Hermes's attachments; exactly once, through kill -9s."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from contextlib import closing
from pathlib import Path

from tests.harness import hold_commit
from tests.hermes.conftest import HermesLane, repository


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def result_commits(repo: Path, branch: str, task_id: str) -> list[str]:
    """The commits on ``branch`` whose trailers name the task (the runner's result commits)."""
    return _git(
        repo, "log", "--format=%H", f"--grep=^Lane-Task: default/{task_id}$", branch
    ).split()


def checkout_changes(repo: Path) -> str:
    """What the user's checkout holds uncommitted, Hermes's own worktrees (``.worktrees/``,
    its ``worktree`` kind) aside."""
    return _git(repo, "status", "--porcelain", "--", ".", ":!.worktrees")


def delivered(hermes_lane: HermesLane, task_id: str) -> dict[str, object]:
    with closing(hermes_lane.hermes.db()) as db:
        (row,) = db.execute(
            "SELECT metadata FROM task_runs WHERE task_id = ? AND outcome = 'completed'",
            (task_id,),
        ).fetchall()
    found: dict[str, object] = json.loads(row["metadata"])["lane_runner"]["delivery"]
    return found


def test_every_workspace_kind_gets_its_work_committed_or_kept(
    hermes_lane: HermesLane, tmp_path: Path
) -> None:
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    before = _git(repo, "rev-parse", "HEAD")
    ids = {
        kind: hermes.create(
            f"{kind} task", "--assignee", "cli-codex-low", "--body", "[sim:artifacts]", *args
        )
        for kind, args in {
            "dir": ["--workspace", f"dir:{repo}"],
            "worktree": ["--workspace", f"worktree:{repo}"],
            "scratch": [],
        }.items()
    }
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0

    # dir: a commit on the task's branch of the repository; the user's checkout as it was.
    branch = f"lane/default/{ids['dir']}"
    (commit,) = result_commits(repo, branch, ids["dir"])
    assert "sim-output.txt" in _git(repo, "show", "--name-only", "--format=", commit)
    assert _git(repo, "rev-parse", "HEAD") == before
    assert _git(repo, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert checkout_changes(repo) == ""
    shown = delivered(hermes_lane, ids["dir"])
    assert shown["branch"] == branch and shown["commit"] == commit

    # worktree: on the branch Hermes names, in Hermes's worktree, nothing left uncommitted.
    task = json.loads(hermes.hermes("show", ids["worktree"], "--json"))["task"]
    place, hermes_branch = Path(task["workspace_path"]), task["branch_name"]
    assert hermes_branch == f"wt/{ids['worktree']}"
    (commit,) = result_commits(repo, hermes_branch, ids["worktree"])
    assert _git(place, "rev-parse", "HEAD").strip() == commit
    assert _git(place, "status", "--porcelain") == ""
    assert delivered(hermes_lane, ids["worktree"])["branch"] == hermes_branch

    # scratch: no repository; Hermes keeps the artifact as an attachment.
    listed = json.loads(hermes.hermes("attachments", ids["scratch"], "--json"))
    assert [a["filename"] for a in listed] == ["sim-output.txt"]


def test_hermes_work_is_committed_exactly_once_through_kill_9s(
    hermes_lane: HermesLane, tmp_path: Path
) -> None:
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    kinds = ["dir", "worktree"] * 3
    reviewed = {1, 2}  # these ask for review: their results go to review, once
    hermes_lane.write_config(review="off")  # and wait there (the column left alone)
    ids = [
        hermes.create(
            f"task {n}", "--assignee", "cli-codex-low", "--body", "[sim:slow:0.05:12]",
            "--workspace", f"{kind}:{repo}", *(["--skill", "review"] if n in reviewed else []),
        )
        for n, kind in enumerate(kinds)
    ]

    def running() -> int:
        with closing(hermes.db()) as db:
            return int(db.execute("SELECT COUNT(*) FROM tasks WHERE status = 'running'")
                       .fetchone()[0])

    rng = random.Random(42)
    kills_mid_run = 0
    for _ in range(4):
        daemon = hermes_lane.start()
        deadline = time.monotonic() + 60
        while not running() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.2))
        kills_mid_run += running() > 0
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
    assert kills_mid_run >= 2
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0

    statuses = hermes.statuses(ids)
    assert [statuses[task_id] for task_id in ids] == [
        "review" if n in reviewed else "done" for n in range(len(ids))
    ]
    for task_id, kind in zip(ids, kinds, strict=True):
        branch = f"lane/default/{task_id}" if kind == "dir" else f"wt/{task_id}"
        (commit,) = result_commits(repo, branch, task_id)  # exactly one result commit
        assert delivered(hermes_lane, task_id)["commit"] == commit
    assert checkout_changes(repo) == ""  # the user's checkout untouched


def test_a_kill_9_inside_the_commit_on_hermes_s_branch_is_delivered_once(
    hermes_lane: HermesLane, tmp_path: Path
) -> None:
    """The daemon is SIGKILLed once its commit is on the branch Hermes names and before
    the journal has the result: restarted, it sends that very commit to review, never a
    second one, and its CLI does not run again."""
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    held, release = tmp_path / "commit-held", tmp_path / "commit-release"
    hermes_lane.extra_env.update(hold_commit(held, release))
    hermes_lane.write_config(review="off")  # the result waits in review (column left alone)
    task_id = hermes.create(
        "crash at the commit", "--assignee", "cli-codex-low", "--body", "[sim:artifacts]",
        "--workspace", f"worktree:{repo}", "--skill", "review",
    )
    daemon = hermes_lane.start()
    hermes_lane.wait(held.exists, what="the runner's commit")
    daemon.send_signal(signal.SIGKILL)
    assert daemon.wait(timeout=30) == -signal.SIGKILL
    release.touch()
    branch = f"wt/{task_id}"
    (made,) = result_commits(repo, branch, task_id)
    assert hermes.statuses([task_id]) == {task_id: "running"}
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes.statuses([task_id]) == {task_id: "review"}
    assert result_commits(repo, branch, task_id) == [made]
    assert delivered(hermes_lane, task_id)["commit"] == made
    place = Path(json.loads(hermes.hermes("show", task_id, "--json"))["task"]["workspace_path"])
    assert (place / "sim-output.txt").read_text().count("turn") == 1  # the CLI ran once
