"""Hermes's review column for our lanes (issue 42), on the real hermes-agent package and
beside Hermes's own CLI and dispatcher: a task that asks for review goes to ``review``
when our implementer is done, is never read as blocked, is claimed as Hermes claims a
review, and a reviewer's verdict ends it done or sends it back with the findings.

The column's own tests use a stand-in reviewer with the board's ``review`` set ``off``
(the daemon leaves the column alone); the last test is the daemon serving it with the
lane's reviewer, the simulated CLIs."""

from __future__ import annotations

import json
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from lane_runner.board.hermes.store import HermesStore
from lane_runner.board.model import CompleteOutcome, ReviewVerdict, Status
from lane_runner.run.reviewcolumn import ReviewFailed, ReviewRequest, serve_one
from tests.hermes.conftest import HermesLane, repository

FINDING = "the empty input is not handled: add a test for it"


def statuses_seen(hermes_lane: HermesLane, task_id: str) -> list[str]:
    """The task's moves as Hermes's events record them, in order."""
    moves = {
        "claimed": "running", "review_requested": "review", "completed": "done",
        "review_changes_requested": "ready", "review_handed_back": "review",
    }
    with closing(hermes_lane.hermes.db()) as db:
        kinds = [row[0] for row in db.execute(
            "SELECT kind FROM task_events WHERE task_id = ? ORDER BY id", (task_id,)
        )]
    return ["ready", *(moves[kind] for kind in kinds if kind in moves)]


@pytest.fixture
def store(hermes_lane: HermesLane, monkeypatch: pytest.MonkeyPatch) -> HermesStore:
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes_lane.hermes.path))
    hermes_lane.write_config(review="off")  # the stand-in reviews, not the daemon
    return HermesStore(f"hermes://{hermes_lane.hermes.path}")


def test_a_task_goes_to_review_back_to_its_implementer_and_is_done(
    hermes_lane: HermesLane, store: HermesStore, tmp_path: Path
) -> None:
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    task_id = hermes.create(
        "fix the parser", "--assignee", "cli-codex-low", "--skill", "review",
        "--body", "[sim:artifacts]", "--workspace", f"dir:{repo}",
    )
    plain = hermes.create("no review asked", "--assignee", "cli-codex-low", "--body", "do it")
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0

    board = store.board("default")
    assert hermes.statuses([task_id, plain]) == {task_id: "review", plain: "done"}
    seen = board.get_task(task_id)
    assert (seen.status, seen.block_kind) == (Status.REVIEW, None)  # never read as blocked
    assert board.counts()["review"] == 1
    # Hermes's own dispatcher leaves a cli-* review alone (no such profile).
    hermes.hermes("dispatch")
    assert hermes.statuses([task_id]) == {task_id: "review"}

    def request_changes(request: ReviewRequest) -> ReviewVerdict:
        assert request.task.id == task_id and request.task.result is not None
        assert request.task.result["status"] == "completed"  # the implementer's result
        return ReviewVerdict(False, "one case is missing", (FINDING,))

    reviewed = serve_one(board, "test-node", 60, request_changes)
    assert reviewed is not None and reviewed.outcome is CompleteOutcome.COMPLETED
    assert hermes.statuses([task_id]) == {task_id: "ready"}
    shown = json.loads(hermes.hermes("show", task_id, "--json"))
    assert any(FINDING in comment["body"] for comment in shown["comments"])
    assert FINDING in board.worker_context(task_id)  # what the implementer reads next
    assert serve_one(board, "test-node", 60, request_changes) is None  # nothing in review

    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes.statuses([task_id]) == {task_id: "review"}

    def approve(request: ReviewRequest) -> ReviewVerdict:
        return ReviewVerdict(True, "looks right now")

    reviewed = serve_one(board, "test-node", 60, approve)
    assert reviewed is not None and reviewed.outcome is CompleteOutcome.COMPLETED
    assert hermes.statuses([task_id]) == {task_id: "done"}
    assert statuses_seen(hermes_lane, task_id) == [
        "ready", "running", "review", "running", "ready", "running", "review", "running", "done",
    ]
    final = json.loads(hermes.hermes("show", task_id, "--json"))["task"]
    assert json.loads(final["result"])["status"] == "completed"  # the implementer's, kept
    with closing(hermes.db()) as db:
        outcomes = [row[0] for row in db.execute(
            "SELECT outcome FROM task_runs WHERE task_id = ? ORDER BY id", (task_id,)
        )]
    assert outcomes == ["completed", "reclaimed", "completed", "completed"]
    # Each implementer run's result was committed once on the task's branch.
    commits = subprocess.run(
        ["git", "log", "--format=%H", f"--grep=^Lane-Task: default/{task_id}$",
         f"lane/default/{task_id}"],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert len(commits) == 2


def test_a_review_without_a_verdict_waits_in_review_again(
    hermes_lane: HermesLane, store: HermesStore
) -> None:
    hermes = hermes_lane.hermes
    task_id = hermes.create("t", "--assignee", "cli-claude-low", "--skill", "sdlc-review",
                            "--body", "do it")
    profile = hermes.create("theirs", "--assignee", "default", "--skill", "review")
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    board = store.board("default")
    assert hermes.statuses([task_id]) == {task_id: "review"}

    def fails(request: ReviewRequest) -> ReviewVerdict:
        raise ReviewFailed("the reviewer's CLI exited 1")

    reviewed = serve_one(board, "test-node", 60, fails)
    assert reviewed is not None and reviewed.verdict is None
    assert hermes.statuses([task_id, profile]) == {task_id: "review", profile: "ready"}
    # A verdict on a run that is no longer current is refused.
    assert board.end_review(reviewed.run_id, True, "late", []) is CompleteOutcome.STALE
    assert hermes.statuses([task_id]) == {task_id: "review"}


def test_a_result_sent_to_review_replayed_is_a_duplicate(
    hermes_lane: HermesLane, store: HermesStore
) -> None:
    """The journal replays a result whose board commit it did not see: the run that sent
    it to review is the witness, whatever the task did since."""
    hermes = hermes_lane.hermes
    task_id = hermes.create("t", "--assignee", "cli-codex-low", "--skill", "review")
    board = store.board("default")
    claim = board.claim("test-node", 60, "")
    assert claim is not None and claim.task.id == task_id
    result = {"status": "completed", "summary": "done", "artifacts": []}
    digest = {"journal_digest": "a" * 32}
    assert board.complete(claim.run.id, result, "done", digest) is CompleteOutcome.COMPLETED
    assert hermes.statuses([task_id]) == {task_id: "review"}
    assert board.complete(claim.run.id, result, "done", digest) is CompleteOutcome.DUPLICATE
    other = {"journal_digest": "b" * 32}
    assert board.complete(claim.run.id, result, "done", other) is CompleteOutcome.STALE
    assert board.release_hold(task_id, claim.run.id)  # as the runner does after follow-ups
    reviewed = serve_one(board, "test-node", 60, lambda r: ReviewVerdict(False, "no", ("x",)))
    assert reviewed is not None and hermes.statuses([task_id]) == {task_id: "ready"}
    assert board.complete(claim.run.id, result, "done", digest) is CompleteOutcome.DUPLICATE


def test_a_review_whose_runner_died_waits_in_review_again(
    hermes_lane: HermesLane, store: HermesStore
) -> None:
    """A reviewer's runner dies with the review claimed: ``recover`` hands the review run
    back, and the task waits in review again (not ready: the implementer's result stands),
    no failure counted."""
    hermes = hermes_lane.hermes
    task_id = hermes.create("t", "--assignee", "cli-codex-low", "--skill", "review")
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    board = store.board("default")
    claim = board.claim_review(hermes_lane.home.node_id(), 60)
    assert claim is not None and hermes.statuses([task_id]) == {task_id: "running"}
    assert hermes_lane.cli("recover").returncode == 0
    assert hermes.statuses([task_id]) == {task_id: "review"}
    assert board.get_task(task_id).failure_count == 0
    assert board.get_run(claim.run.id).ended_at is not None


def test_the_daemon_serves_the_review_column_with_the_lanes_reviewer(
    hermes_lane: HermesLane, tmp_path: Path
) -> None:
    """ready → running → review → (the simulated reviewer asks for changes once) → ready
    → running → review → done, all in one ``run --until-idle``, each step once; the
    reviewer is the other provider than the implementer's, its usage counted as review."""
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    task_id = hermes.create(
        "fix the parser", "--assignee", "cli-codex-low", "--skill", "review",
        "--body", "[sim:feedback]", "--workspace", f"dir:{repo}",
    )
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0

    assert hermes.statuses([task_id]) == {task_id: "done"}
    assert statuses_seen(hermes_lane, task_id) == [
        "ready", "running", "review", "running", "ready", "running", "review", "running", "done",
    ]
    with closing(hermes.db()) as db:
        outcomes = [row[0] for row in db.execute(
            "SELECT outcome FROM task_runs WHERE task_id = ? ORDER BY id", (task_id,)
        )]
    assert outcomes == ["completed", "reclaimed", "completed", "completed"]
    shown = json.loads(hermes.hermes("show", task_id, "--json"))
    asked = [c["body"] for c in shown["comments"] if "changes requested" in c["body"]]
    assert len(asked) == 1 and "SIM-FIX" in asked[0]  # the finding, told to the implementer
    assert any("review by claude/" in c["body"] for c in shown["comments"])
    # The implementer's fix (made once told) is committed on the task's branch.
    branch = f"lane/default/{task_id}"
    tree = subprocess.run(["git", "ls-tree", "-r", "--name-only", branch], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.split()
    assert "sim-reviewed.txt" in tree
    state = json.loads((hermes_lane.home.lane_dir("default") / f"{task_id}.json").read_text())
    roles = [(a["role"], a["provider"]) for a in state["attempts"]]
    assert roles == [("implement", "codex"), ("review", "claude"),
                     ("implement", "codex"), ("review", "claude")]


def test_a_reviewer_that_gives_no_verdict_leaves_the_task_in_review_and_the_batch_ends(
    hermes_lane: HermesLane,
) -> None:
    """The reviewer's CLI crashes: the review run is handed back, the task waits in
    review (never done, never ready), and ``run --until-idle`` ends with it left waiting
    (exit 3) instead of claiming the same review over and over."""
    hermes = hermes_lane.hermes
    hermes_lane.control.write_text(json.dumps({"claude": "crash"}))
    task_id = hermes.create("t", "--assignee", "cli-codex-low", "--skill", "review",
                            "--body", "do it")
    batch = hermes_lane.cli("run", "--until-idle", "--json", timeout=300)
    assert batch.returncode == 3, batch.stderr
    assert json.loads(batch.stdout)["waiting"] == [
        {"board": "default", "task": task_id, "why": "review handed back without a verdict"}
    ]
    assert hermes.statuses([task_id]) == {task_id: "review"}
    with closing(hermes.db()) as db:
        outcomes = [row[0] for row in db.execute(
            "SELECT outcome FROM task_runs WHERE task_id = ? ORDER BY id", (task_id,)
        )]
    assert outcomes == ["completed", "crashed"]
