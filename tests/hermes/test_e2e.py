"""The daemon on a Hermes board end to end: Hermes's CLI files the work, the daemon is
SIGKILLed over and over, and Hermes's own database is the witness afterwards."""

from __future__ import annotations

import json
import random
import signal
import time
from contextlib import closing
from pathlib import Path

from journal import Journal
from lane_runner.service.leftovers import find as find_workers
from tests.hermes.conftest import HermesLane, repository

UNFINISHED = {"pending", "prepared", "staging"}


def test_a_hermes_board_is_served_exactly_once_through_kill_9s(
    hermes_lane: HermesLane, tmp_path: Path
) -> None:
    hermes = hermes_lane.hermes
    repo = repository(tmp_path / "repo")
    lanes = ["cli-auto", "cli-codex-low", "cli-claude-high", "cli-codex-medium"]
    workspaces = [
        ["--workspace", f"dir:{tmp_path / 'shared'}"],
        ["--workspace", f"worktree:{repo}"],
        [],
    ]
    plain = [
        hermes.create(
            f"task {n}",
            "--assignee",
            lanes[n % 4],
            "--body",
            "[sim:slow:0.1:15]" if n % 2 == 0 else "do it",
            *workspaces[n % 3],
        )
        for n in range(12)
    ]
    parent = hermes.create("parent", "--assignee", "cli-codex-low", "--body", "[sim:slow:0.05:10]")
    child = hermes.create("child", "--assignee", "cli-claude-high", "--parent", parent)
    profile = hermes.create("for a Hermes profile", "--assignee", "default", "--priority", "9")
    blocked = hermes.create("blocked", "--assignee", "cli-codex-high", "--body", "[sim:blocked]")
    goal = hermes.create(
        "goal",
        "--assignee",
        "cli-claude-medium",
        "--body",
        "[sim:goal:2]",
        "--goal",
        "--goal-max-turns",
        "3",
    )
    done_ids = [*plain, parent, child, goal]

    def running() -> int:
        with closing(hermes.db()) as db:
            return int(
                db.execute("SELECT COUNT(*) FROM tasks WHERE status = 'running'").fetchone()[0]
            )

    rng = random.Random(20261130)
    kills_mid_run = 0
    for _ in range(5):
        daemon = hermes_lane.start()
        deadline = time.monotonic() + 60
        while not running() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # until this daemon has claimed something (or all is done)
        time.sleep(rng.uniform(0.0, 1.5))
        kills_mid_run += running() > 0
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
    assert kills_mid_run >= 3
    # The Hermes profile's task stays ready: --until-idle must not wait for it.
    # 4 when this batch is the one that ran the [sim:blocked] task (docs/commands.md).
    assert hermes_lane.start("--until-idle").wait(timeout=300) in (0, 4)

    db = hermes.db()
    restarted = db.execute("SELECT COUNT(*) FROM task_runs WHERE outcome = 'reclaimed'")
    assert restarted.fetchone()[0] > 0  # the restarts handed the killed runs back
    spent: dict[str, int] = {}
    for task_id in done_ids:
        runs = db.execute(
            "SELECT id, outcome, metadata FROM task_runs WHERE task_id = ? AND outcome = "
            "'completed'",
            (task_id,),
        ).fetchall()
        assert len(runs) == 1, task_id
        completions = db.execute(
            "SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'completed'", (task_id,)
        ).fetchone()[0]
        assert completions == 1, task_id
        routes = db.execute(
            "SELECT body FROM task_comments WHERE task_id = ? AND author = 'lane-runner'",
            (task_id,),
        ).fetchall()
        assert routes, task_id  # the routing decision, as a comment on Hermes's task
        mark = json.loads(runs[0]["metadata"])["lane_runner"]
        assert mark["run_id"] == runs[0]["id"] and len(mark["journal_digest"]) == 32
        # The usage ledger's word lands where Hermes keeps the run's metadata (issue 30):
        # the simulated codex reports tokens, the simulated claude none.
        spent[task_id] = mark["usage"]["task"]["total_tokens"]
        row = db.execute("SELECT result, status FROM tasks WHERE id = ?", (task_id,)).fetchone()
        assert json.loads(row["result"])["status"] == "completed"

    assert sum(spent.values()) > 0 and set(spent) == set(done_ids)
    (blocked_row,) = db.execute(
        "SELECT t.status, r.summary FROM tasks t JOIN task_runs r ON r.task_id = t.id "
        "WHERE t.id = ? AND r.outcome = 'blocked'",
        (blocked,),
    ).fetchall()
    assert blocked_row["status"] == "blocked"
    assert "simulated blocker: the task needs a human decision" in blocked_row["summary"]

    parent_done = db.execute(
        "SELECT MIN(id) FROM task_events WHERE task_id = ? AND kind = 'completed'", (parent,)
    ).fetchone()[0]
    child_claims = db.execute(
        "SELECT id FROM task_events WHERE task_id = ? AND kind = 'claimed'", (child,)
    ).fetchall()
    assert child_claims and all(row[0] > parent_done for row in child_claims)

    profile_row = db.execute(
        "SELECT status, claim_lock FROM tasks WHERE id = ?", (profile,)
    ).fetchone()
    assert tuple(profile_row) == ("ready", None)
    runs_of_profile = "SELECT COUNT(*) FROM task_runs WHERE task_id = ?"
    assert db.execute(runs_of_profile, (profile,)).fetchone()[0] == 0

    goal_result = json.loads(
        db.execute("SELECT result FROM tasks WHERE id = ?", (goal,)).fetchone()[0]
    )
    assert "done in turn 2" in goal_result["summary"]  # the goal loop went past turn 1
    left = [
        e for e in Journal(hermes_lane.home.lanes).entries() if e.kind in UNFINISHED or not e.valid
    ]
    assert left == []
    assert find_workers(hermes_lane.home.node_id()) == []
