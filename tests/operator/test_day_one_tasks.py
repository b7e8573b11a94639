"""Day one with the command line (issue 27): changing what was filed, driven through the
installed ``lane-runner`` script on the SQLite and the PostgreSQL board: workspaces
checked at ``task add``, ``task edit``, ``task retry``, ``task delete``, ``board delete``,
``status --watch``; on a Hermes home each change is refused naming Hermes's command."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from lane_runner import config
from lane_runner.board import open_store
from lane_runner.board.base import Store
from lane_runner.board.model import NewTask, Outcome
from tests.harness import BOARD, Lane, git
from tests.hermes.conftest import make_home
from tests.operator.console import closed_pipe, console, json_of


@pytest.fixture(params=["sqlite", "postgres"])
def site(request: pytest.FixtureRequest, lane: Lane) -> Iterator[Store]:
    """``lane``'s home on the chosen board backend (board ``BOARD`` made by the CLI on
    PostgreSQL), and a store of it for the test's own claims."""
    if request.param == "postgres":
        lane.write_config(board_url=request.getfixturevalue("postgres_database"))
        assert console(lane, "board", "create", BOARD).returncode == 0
    store = open_store(config.load(lane.root, environ={}))
    yield store
    store.close()


def refused(lane: Lane, *args: str) -> str:
    done = console(lane, *args)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1
    return done.stderr


def test_task_add_checks_the_workspace_in_gits_words(lane: Lane, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    empty = tmp_path / "empty"
    git("init", "-q", "-b", "main", str(empty), cwd=tmp_path)
    add = ("task", "add", "--board", BOARD, "--title", "t", "--workspace")
    assert "--workspace: workspace /nonexistent does not exist" in refused(
        lane, *add, "/nonexistent")
    assert "git said: fatal: not a git repository" in refused(lane, *add, str(plain))
    assert "git said: fatal: your current branch 'main' does not have any commits yet" in (
        refused(lane, *add, str(empty)))
    assert json_of(console(lane, "task", "ls", "--json")) == []
    added = json_of(console(lane, *add, str(lane.repo), "--json"))
    assert (added["workspace"], added["status"]) == (str(lane.repo), "ready")


def test_task_add_checks_the_workspace_as_the_worker_user(lane: Lane) -> None:
    user = os.environ.get("LANE_CONTRACT_WORKER_USER")
    if os.geteuid() != 0 or not user:
        pytest.skip("needs root and LANE_CONTRACT_WORKER_USER (.ci/run sets both)")
    lane.write_config(worker_user=user)
    # The test's directories are root's and private: the worker user cannot enter them.
    said = refused(lane, "task", "add", "--board", BOARD, "--title", "t",
                   "--workspace", str(lane.repo))
    assert f"cannot be used by the worker user {user}: git said: fatal:" in said
    assert "Permission denied" in said


def test_task_edit_changes_what_was_filed(lane: Lane, site: Store, tmp_path: Path) -> None:
    task = json_of(console(lane, "task", "add", "--board", BOARD, "--title", "first",
                           "--workspace", "repo", "--json"))
    edited = json_of(console(
        lane, "task", "edit", task["id"], "--title", "second", "--body", "more detail",
        "--assignee", "cli-claude-low", "--priority", "7", "--workspace", str(lane.repo),
        "--max-runtime", "900", "--goal-turns", "2", "--max-retries", "4", "--json",
    ))
    assert {k: edited[k] for k in ("title", "body", "assignee", "priority", "workspace",
                                   "max_runtime", "goal_turns", "max_retries")} == {
        "title": "second", "body": "more detail", "assignee": "cli-claude-low", "priority": 7,
        "workspace": str(lane.repo), "max_runtime": 900.0, "goal_turns": 2, "max_retries": 4,
    }
    events = json_of(console(lane, "task", "show", task["id"], "--json"))["events"]
    assert events[-1]["kind"] == "edited" and "title" in events[-1]["data"]["fields"]
    assert "name what to change" in refused(lane, "task", "edit", task["id"])
    assert "not a git repository" in refused(
        lane, "task", "edit", task["id"], "--workspace", str(tmp_path))
    assert "argument --goal-turns: at least 1, not 0" in refused(
        lane, "task", "edit", task["id"], "--goal-turns", "0")
    claimed = site.board(BOARD).claim("node-x", 60, "cli-auto")
    assert claimed is not None and claimed.task.id == task["id"]
    assert "is running (run" in refused(lane, "task", "edit", task["id"], "--title", "third")
    assert json_of(console(lane, "task", "show", task["id"], "--json"))["title"] == "second"


def test_task_retry_reopens_a_blocked_task_with_a_comment(lane: Lane, site: Store) -> None:
    task = json_of(console(lane, "task", "add", "--board", BOARD, "--title", "stuck",
                           "--workspace", str(lane.repo), "--max-retries", "0", "--json"))
    claimed = site.board(BOARD).claim("node-x", 60, "cli-auto")
    assert claimed is not None
    site.board(BOARD).reclaim(claimed.run.id, "crashed", Outcome.FAILED, count_failure=True)
    assert "no task 'nope' on any board" in refused(lane, "task", "retry", "nope")
    retried = json_of(console(lane, "task", "retry", task["id"], "--comment",
                              "the host is fixed", "--json"))
    assert (retried["status"], retried["failure_count"], retried["block_kind"]) == (
        "ready", 0, None)
    shown = json_of(console(lane, "task", "show", task["id"], "--json"))
    assert [c["body"] for c in shown["comments"]] == ["the host is fixed"]
    assert shown["events"][-1]["kind"] == "retried"
    assert "is ready, not blocked: nothing to retry" in refused(lane, "task", "retry", task["id"])
    assert console(lane, "run", "--until-idle").returncode == 0  # and it runs again, to done
    assert json_of(console(lane, "task", "show", task["id"], "--json"))["status"] == "done"


def test_task_delete_and_board_delete(lane: Lane, site: Store) -> None:
    task = json_of(console(lane, "task", "add", "--board", BOARD, "--title", "gone",
                           "--workspace", "repo", "--json"))
    assert "only archived tasks are deleted" in refused(lane, "task", "delete", task["id"])
    deleted = json_of(console(lane, "task", "delete", task["id"], "--force", "--json"))
    assert deleted["deleted"]["id"] == task["id"]
    assert "no task" in refused(lane, "task", "show", task["id"], "--board", BOARD)

    assert console(lane, "board", "create", "spare").returncode == 0
    site.board("spare").add_task(NewTask(title="r", id="r"))
    site.board("spare").add_task(NewTask(title="w", id="w"))
    claimed = site.board("spare").claim("node-x", 60, "cli-auto")
    assert claimed is not None
    for force in ([], ["--force"]):  # nothing deletes a board while a task of it runs
        assert "r is running on board 'spare'" in refused(lane, "board", "delete", "spare", *force)
    site.board("spare").reclaim(claimed.run.id, "stopped", Outcome.RECLAIMED)
    assert "only archived tasks are deleted, and r, w are not" in refused(
        lane, "board", "delete", "spare")
    done = json_of(console(lane, "board", "delete", "spare", "--force", "--json"))
    assert done == {"board": "spare", "deleted": True, "tasks_deleted": 2}
    assert [b["board"] for b in json_of(console(lane, "board", "ls", "--json"))] == [BOARD]


def test_status_watch(lane: Lane) -> None:
    lane.add("counted")
    done = console(lane, "status", "--watch", "--interval", "0.1", "--count", "3", "--json")
    assert done.returncode == 0, done.stderr
    documents = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert len(documents) == 3
    assert {d["boards"][BOARD]["counts"]["ready"] for d in documents} == {1}
    human = console(lane, "status", "--watch", "--interval", "0.1", "--count", "2")
    assert human.returncode == 0 and human.stdout.count("daemon: stopped") == 2
    pipe = closed_pipe()
    try:
        gone = console(lane, "status", "--watch", stdout=pipe)
    finally:
        os.close(pipe)
    assert (gone.returncode, gone.stderr) == (141, "")
    assert "--count goes with --watch" in refused(lane, "status", "--count", "2")


def test_hermes_refuses_each_change_naming_its_command(lane: Lane, tmp_path: Path) -> None:
    hermes = make_home(tmp_path / "h")
    task = hermes.create("theirs", "--assignee", "cli-auto")
    lane.write_config(board_url=f"hermes://{hermes.path}")
    env = {"HERMES_HOME": str(hermes.path)}
    for argv, command in (
        (["task", "edit", task, "--title", "x"], f"hermes kanban assign {task} PROFILE"),
        (["task", "retry", task], f"hermes kanban unblock {task} --reason TEXT"),
        (["task", "delete", task, "--force"], f"hermes kanban archive {task}"),
        (["board", "delete", "default", "--force"], "hermes kanban boards rm default"),
    ):
        done = console(lane, *argv, env=env)
        assert done.returncode == 2 and f"Use '{command}'" in done.stderr, done.stderr
