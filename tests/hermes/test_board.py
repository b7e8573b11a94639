"""The board contract (docs/ARCHITECTURE.md §5) where it applies to a Hermes board.

Homes come from ``hermes kanban init``; tasks from Hermes's own ``create_task``
(what ``hermes kanban create`` calls) or its CLI. What the contract says about
adding, unblocking and archiving tasks does not apply: Hermes owns its tasks,
and lane-runner refuses those commands there.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lane_runner.board.base import BoardUnavailable, HostWorkspace
from lane_runner.board.hermes.board import HermesBoard
from lane_runner.board.hermes.store import HermesStore
from lane_runner.board.model import BlockKind, CompleteOutcome, NewTask, Outcome, Status
from lane_runner.errors import NotFound, UsageError
from tests.hermes.conftest import HERMES, HermesHome, repository

NODE = "node-a"
RESULT = {
    "status": "completed",
    "summary": "ok",
    "changed_files": ["a.py"],
    "tests_run": ["pytest"],
    "artifacts": [],
    "findings": ["a finding"],
    "blockers": [],
}


def add(store: HermesStore, title: str, board: str = "default", **fields: Any) -> str:
    """A task made by Hermes's own ``create_task``, the call behind ``hermes kanban create``."""
    from hermes_cli import kanban_db

    with kanban_db.scoped_current_board(board):
        connection = kanban_db.connect(db_path=store.board(board).path)
        try:
            return str(kanban_db.create_task(connection, title=title, **fields))
        finally:
            connection.close()


def hermes(store: HermesStore, sql: str, *parameters: Any) -> list[sqlite3.Row]:
    connection = sqlite3.connect(store.board("default").path)
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute(sql, parameters).fetchall()
    finally:
        connection.close()


def board(store: HermesStore) -> HermesBoard:
    return store.board("default")


# -- the home and its boards -------------------------------------------------------


def test_serves_every_live_board_or_the_configured_ones(
    hermes_home: HermesHome, hermes_store: HermesStore
) -> None:
    assert hermes_store.board_slugs() == ["default"]
    hermes_home.hermes("boards", "create", "other")
    hermes_home.hermes("boards", "create", "old")
    hermes_home.hermes("boards", "rm", "old")  # Hermes archives it
    assert hermes_store.board_slugs() == ["default", "other"]
    only = HermesStore(f"hermes://{hermes_home.path}", boards=("other", "nope"))
    assert only.board_slugs() == ["other"]
    with pytest.raises(NotFound, match="hermes kanban boards list"):
        only.board("default")


def test_a_bare_hermes_url_serves_the_home_hermes_itself_uses(
    hermes_home: HermesHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERMES_KANBAN_HOME", raising=False)  # restored after, though pinned
    monkeypatch.setenv("HERMES_HOME", str(hermes_home.path))
    store = HermesStore("hermes://")
    assert store.home == hermes_home.path.resolve() and store.board_slugs() == ["default"]


def test_task_commands_are_read_only(hermes_store: HermesStore) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    for attempt in (
        lambda: board(hermes_store).add_task(NewTask(title="x")),
        lambda: board(hermes_store).unblock(task_id),
        lambda: board(hermes_store).archive(task_id),
        lambda: hermes_store.create_board("new"),
    ):
        with pytest.raises(UsageError, match="Hermes owns its tasks. Use 'hermes kanban"):
            attempt()
    assert board(hermes_store).get_task(task_id).status is Status.READY


def test_stops_and_pauses_are_left_to_hermes(hermes_store: HermesStore) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    b = board(hermes_store)
    claimed = b.claim(NODE, 60, "")
    assert claimed is not None
    for attempt in (
        lambda: b.request_stop(task_id, "why", requeue=False),
        lambda: b.pause("why", "ops"),
        b.resume,
    ):
        with pytest.raises(UsageError, match="its tasks and dispatch are Hermes's"):
            attempt()
    assert (b.stop_request(claimed.run.id), b.paused()) == (None, None)
    assert b.get_task(task_id).status is Status.RUNNING


def hermes_help(home: HermesHome, words: list[str], seen: dict[str, str]) -> str:
    """``hermes WORDS --help`` (each asked once: Hermes takes a second to start)."""
    key = " ".join(words)
    if key not in seen:
        done = subprocess.run(
            [HERMES, *words, "--help"], env=home.environ(), capture_output=True, text=True
        )
        assert done.returncode == 0, f"'hermes {key}' does not exist: {done.stderr}"
        seen[key] = done.stdout
    return seen[key]


def check_command(home: HermesHome, command: str, seen: dict[str, str]) -> None:
    """``command`` (a hint's ``hermes ...``) names subcommands the installed Hermes has.

    Walks argparse's help: at each level the next word must be one of the listed
    subcommands; options are skipped with their value; words left over must be
    positional arguments of the last level, which must take some.
    """
    words = command.split()[1:]
    path: list[str] = []
    while words:
        text = hermes_help(home, path, seen)
        word = words.pop(0)
        if word.startswith("-"):
            assert re.search(rf"^\s+{re.escape(word)}\b", text, re.MULTILINE), word
            if re.search(rf"^\s+{re.escape(word)} [^\s,]", text, re.MULTILINE):
                words.pop(0)  # its value
            continue
        listed = re.search(r"positional arguments:\n\s+\{([\w,-]+)\}", text)
        if listed is None:
            assert "positional arguments:" in text, f"'hermes {' '.join(path)}' takes no {word!r}"
            return
        assert word in listed.group(1).split(","), f"no 'hermes {' '.join(path)} {word}'"
        path.append(word)
    hermes_help(home, path, seen)


def test_every_hint_names_a_command_the_installed_hermes_has(
    hermes_home: HermesHome, hermes_store: HermesStore
) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    b = board(hermes_store)
    refusals: list[Callable[[], object]] = [
        lambda: b.add_task(NewTask(title="x")),
        lambda: b.unblock(task_id),
        lambda: b.archive(task_id),
        lambda: b.request_stop(task_id, "why", requeue=False),
        lambda: b.pause("why", "ops"),
        b.resume,
        lambda: hermes_store.create_board("x"),
        lambda: hermes_store.board("absent"),
        lambda: HermesStore(f"hermes://{hermes_home.path}/absent"),
        lambda: HermesStore(f"hermes://{hermes_home.path / 'kanban'}"),
    ]
    hermes_home.hermes("boards", "create", "broken")
    (hermes_home.path / "kanban" / "boards" / "broken" / "kanban.db").write_bytes(b"no" * 100)
    refusals.append(lambda: hermes_store.board("broken").claim(NODE, 60, ""))
    commands = []
    for refusal in refusals:
        with pytest.raises((UsageError, NotFound, BoardUnavailable)) as raised:
            refusal()
        commands += re.findall(r"'(?:\S+=\S+ )*(hermes [^']+)'", str(raised.value))
    assert len(commands) >= len(refusals)
    seen: dict[str, str] = {}
    for command in dict.fromkeys(commands):
        check_command(hermes_home, command, seen)


# -- claims ------------------------------------------------------------------------


def test_claims_cli_lanes_by_priority_and_never_a_profiles_task(
    hermes_store: HermesStore,
) -> None:
    profile = add(hermes_store, "for a Hermes profile", assignee="default", priority=9)
    low = add(hermes_store, "low", assignee="cli-codex-low", priority=1)
    high = add(hermes_store, "high", assignee="cli-claude-high", priority=5)
    unassigned = add(hermes_store, "unassigned")
    b = board(hermes_store)
    assert b.claim(NODE, 60, "") is not None and b.claim(NODE, 60, "") is not None
    assert b.claim(NODE, 60, "") is None  # unassigned stays Hermes's without a default
    claimed = b.claim(NODE, 60, "cli-auto")
    assert claimed is not None and (claimed.task.id, claimed.task.assignee) == (
        unassigned,
        "cli-auto",
    )
    runs = hermes(hermes_store, "SELECT task_id FROM task_runs ORDER BY id")
    assert [r["task_id"] for r in runs] == [high, low, unassigned]
    untouched = hermes(hermes_store, "SELECT * FROM tasks WHERE id = ?", profile)[0]
    assert (untouched["status"], untouched["claim_lock"]) == ("ready", None)
    kinds = hermes(hermes_store, "SELECT kind FROM task_events WHERE task_id = ?", profile)
    assert [k["kind"] for k in kinds] == ["created"]


def test_a_claim_is_a_hermes_run_with_a_lease(hermes_store: HermesStore) -> None:
    task_id = add(hermes_store, "t", assignee="cli-codex-medium", max_runtime_seconds=90)
    before = time.time()
    claimed = board(hermes_store).claim(NODE, 60, "")
    assert claimed is not None
    run, task = claimed.run, claimed.task
    assert (task.status, task.current_run_id, task.max_runtime) == (Status.RUNNING, run.id, 90)
    assert run.node == NODE and run.lease_expires_at >= int(before) + 60
    row = hermes(hermes_store, "SELECT * FROM tasks WHERE id = ?", task_id)[0]
    assert row["status"] == "running" and row["claim_lock"].startswith(f"lane-runner:{NODE}:")
    assert board(hermes_store).running_runs(NODE) == [board(hermes_store).get_run(run.id)]


def test_a_live_lease_survives_hermes_and_a_dead_one_is_hermes_to_release(
    hermes_store: HermesStore,
) -> None:
    from hermes_cli import kanban_db

    add(hermes_store, "live", assignee="cli-auto")
    add(hermes_store, "dead", assignee="cli-auto")
    b = board(hermes_store)
    live = b.claim(NODE, 3600, "")
    dead = b.claim(NODE, 1, "")
    assert live is not None and dead is not None
    time.sleep(2.1)  # the dead runner's one-second lease runs out
    assert b.heartbeat(live.run.id, 3600)
    assert [r.id for r in b.expired_runs()] == [dead.run.id]
    connection = kanban_db.connect(db_path=b.path)
    try:
        assert kanban_db.release_stale_claims(connection) == 1  # Hermes's own sweep
    finally:
        connection.close()
    assert b.get_task(live.task.id).status is Status.RUNNING
    assert b.heartbeat(live.run.id, 3600)
    assert not b.heartbeat(dead.run.id, 60)
    assert b.complete(dead.run.id, RESULT, "late") is CompleteOutcome.STALE
    beats = hermes(
        hermes_store, "SELECT last_heartbeat_at FROM task_runs WHERE id = ?", live.run.id
    )
    assert beats[0][0] is not None


def test_a_child_is_claimed_only_once_hermes_says_its_parent_is_done(
    hermes_store: HermesStore,
) -> None:
    parent = add(hermes_store, "parent", assignee="cli-codex-low")
    child = add(hermes_store, "child", assignee="cli-auto", parents=[parent], priority=9)
    b = board(hermes_store)
    assert b.get_task(child).parents == (parent,) and b.get_task(child).status is Status.TODO
    first = b.claim(NODE, 60, "")
    assert first is not None and first.task.id == parent
    assert b.claim(NODE, 60, "") is None
    assert b.complete(first.run.id, RESULT, "done") is CompleteOutcome.COMPLETED
    second = b.claim(NODE, 60, "")
    assert second is not None and second.task.id == child


# -- results -----------------------------------------------------------------------


def test_complete_then_duplicate_then_stale_by_run_and_digest(hermes_store: HermesStore) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    b = board(hermes_store)
    claimed = b.claim(NODE, 60, "")
    assert claimed is not None
    metadata = {"provider": "codex", "sessions": {"codex": "th-1"}, "journal_digest": "d1"}
    assert b.complete(claimed.run.id, RESULT, "ok", metadata) is CompleteOutcome.COMPLETED
    assert b.complete(claimed.run.id, RESULT, "ok", metadata) is CompleteOutcome.DUPLICATE
    other = {**metadata, "journal_digest": "d2"}
    assert b.complete(claimed.run.id, RESULT, "ok", other) is CompleteOutcome.STALE
    assert b.complete(claimed.run.id + 1, RESULT, "ok", metadata) is CompleteOutcome.STALE
    task = b.get_task(task_id)
    assert (task.status, task.completed_run_id, task.summary, task.result) == (
        Status.DONE,
        claimed.run.id,
        "ok",
        RESULT,
    )
    run = hermes(hermes_store, "SELECT * FROM task_runs WHERE task_id = ?", task_id)
    assert [(r["outcome"], r["summary"]) for r in run] == [("completed", "ok")]
    stored = json.loads(run[0]["metadata"])
    assert stored["changed_files"] == ["a.py"] and stored["findings"] == ["a finding"]
    assert stored["lane_runner"] == {
        "provider": "codex",
        "sessions": {"codex": "th-1"},
        "run_id": claimed.run.id,
        "journal_digest": "d1",
    }


def test_no_completion_for_a_run_that_is_no_longer_current(hermes_store: HermesStore) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    b = board(hermes_store)
    old = b.claim(NODE, 60, "")
    assert old is not None
    assert b.reclaim(old.run.id, "restart", Outcome.RECLAIMED)
    new = b.claim(NODE, 60, "")
    assert new is not None and new.run.id != old.run.id
    assert not b.reclaim(old.run.id, "again", Outcome.RECLAIMED)
    assert not b.block(old.run.id, "no", BlockKind.CAPABILITY)
    assert not b.heartbeat(old.run.id, 60)
    assert b.complete(old.run.id, RESULT, "old") is CompleteOutcome.STALE
    assert b.get_task(task_id).current_run_id == new.run.id


@pytest.mark.parametrize(
    ("kind", "hermes_kind"),
    [
        (BlockKind.NEEDS_INPUT, "needs_input"),
        (BlockKind.CAPABILITY, "capability"),
        (BlockKind.GAVE_UP, None),
    ],
)
def test_block_keeps_the_workers_words_and_kind(
    hermes_store: HermesStore, kind: BlockKind, hermes_kind: str | None
) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    b = board(hermes_store)
    claimed = b.claim(NODE, 60, "")
    assert claimed is not None
    assert b.block(claimed.run.id, "needs the API key", kind, count_failure=False)
    row = hermes(hermes_store, "SELECT status, block_kind FROM tasks WHERE id = ?", task_id)[0]
    assert (row["status"], row["block_kind"]) == ("blocked", hermes_kind)
    task = b.get_task(task_id)
    assert (task.status, task.block_reason) == (Status.BLOCKED, "needs the API key")
    assert b.runs(task_id)[0].outcome is Outcome.BLOCKED
    assert not b.heartbeat(claimed.run.id, 60)


class Crash(Exception):
    """The daemon dying between two Hermes calls of one transition."""


def crash_after(monkeypatch: pytest.MonkeyPatch, b: HermesBoard, call: str) -> None:
    """Hermes's ``call`` does its work, then the process "dies" before anything else."""
    real = getattr(b._kb, call)

    def then_crash(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise Crash(call)

    monkeypatch.setattr(b._kb, call, then_crash)


def test_claiming_an_unassigned_task_is_one_transaction(
    hermes_store: HermesStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = add(hermes_store, "no assignee")
    b = board(hermes_store)
    with monkeypatch.context() as patch:
        crash_after(patch, b, "assign_task")
        with pytest.raises(Crash):
            b.claim(NODE, 60, "cli-auto")
    (row,) = hermes(hermes_store, "SELECT assignee, status FROM tasks WHERE id = ?", task_id)
    assert tuple(row) == (None, "ready")  # not left in the default lane, unclaimed
    assert "assigned" not in [e.kind for e in b.events(task_id)]
    claimed = b.claim(NODE, 60, "cli-auto")
    assert claimed is not None and claimed.task.assignee == "cli-auto"
    kinds = [e.kind for e in b.events(task_id)]
    assert kinds[kinds.index("assigned") :] == ["assigned", "claimed"]


def test_a_counted_block_is_one_transaction(
    hermes_store: HermesStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    b = board(hermes_store)
    claimed = b.claim(NODE, 60, "")
    assert claimed is not None
    with monkeypatch.context() as patch:
        crash_after(patch, b, "block_task")
        with pytest.raises(Crash):
            b.block(claimed.run.id, "tests fail", BlockKind.CAPABILITY)
    task = b.get_task(task_id)
    assert (task.status, task.failure_count) == (Status.RUNNING, 0)  # not blocked, uncounted
    assert b.block(claimed.run.id, "tests fail", BlockKind.CAPABILITY)
    task = b.get_task(task_id)
    assert (task.status, task.failure_count) == (Status.BLOCKED, 1)


def test_hermes_s_hooks_see_the_transition_committed(
    hermes_store: HermesStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hermes fires its plugins' hooks after its commit; inside one of ours, after ours."""
    from hermes_cli import plugins

    task_id = add(hermes_store, "no assignee")
    seen: list[tuple[str, str]] = []

    def hook(event: str, **fields: Any) -> None:
        (row,) = hermes(hermes_store, "SELECT status FROM tasks WHERE id = ?", task_id)
        seen.append((event, row["status"]))

    monkeypatch.setattr(plugins, "invoke_hook", hook)
    claimed = board(hermes_store).claim(NODE, 60, "cli-auto")
    assert claimed is not None
    assert seen == [("kanban_task_claimed", "running")]


def test_a_task_lane_runner_gave_up_on_stays_blocked_when_hermes_recomputes(
    hermes_home: HermesHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes_home.path))
    store = HermesStore(f"hermes://{hermes_home.path}", failure_limit=1)
    try:
        task_id = add(store, "t", assignee="cli-auto")
        b = board(store)
        claimed = b.claim(NODE, 60, "")
        assert claimed is not None
        assert b.reclaim(claimed.run.id, "crashed", Outcome.FAILED, count_failure=True)
        assert b.get_task(task_id).block_kind is BlockKind.GAVE_UP
        hermes_home.hermes("dispatch")  # Hermes's limit is 2 failures: this one has 1
        assert b.get_task(task_id).status is Status.BLOCKED
        hermes_home.hermes("unblock", task_id)  # a human's decision lifts it
        assert b.get_task(task_id).status is Status.READY
    finally:
        store.close()


def test_reclaim_with_cooldown_waits_before_the_next_claim(hermes_store: HermesStore) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto")
    b = board(hermes_store)
    claimed = b.claim(NODE, 60, "")
    assert claimed is not None
    assert b.reclaim(claimed.run.id, "capacity: busy", Outcome.RECLAIMED, cooldown=3600)
    task = b.get_task(task_id)
    assert task.status is Status.READY and task.next_attempt_at is not None
    assert task.next_attempt_at > time.time() + 3000
    assert b.claim(NODE, 60, "") is None
    (row,) = hermes(
        hermes_store, "SELECT status, outcome FROM task_runs WHERE task_id = ?", task_id
    )
    assert tuple(row) == ("reclaimed", "reclaimed")


def statements_of_a_claim(hermes_store: HermesStore, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many statements one claim sweep runs (SQLite's own trace of the connection)."""
    b = board(hermes_store)
    traced: list[str] = []
    connect = b._kb.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.set_trace_callback(traced.append)
        return connection

    with monkeypatch.context() as patch:
        patch.setattr(b._kb, "connect", tracing)
        assert b.claim(NODE, 60, "") is None
    return len(traced)


def test_cooling_tasks_cost_a_sweep_one_query_however_many_there_are(
    hermes_store: HermesStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = board(hermes_store)
    counts = []
    for cooling in (2, 10):
        while len(b.list_tasks(Status.READY)) < cooling:
            add(hermes_store, "t", assignee="cli-auto")
            claimed = b.claim(NODE, 60, "")
            assert claimed is not None
            b.reclaim(claimed.run.id, "capacity: busy", Outcome.RECLAIMED, cooldown=3600)
        counts.append(statements_of_a_claim(hermes_store, monkeypatch))
    assert counts[0] == counts[1]


def test_counted_failures_give_up_at_the_tasks_max_retries(hermes_store: HermesStore) -> None:
    task_id = add(hermes_store, "t", assignee="cli-auto", max_retries=2)
    b = board(hermes_store)
    for _ in range(2):
        claimed = b.claim(NODE, 60, "")
        assert claimed is not None
        assert b.reclaim(claimed.run.id, "crashed", Outcome.FAILED, count_failure=True)
    task = b.get_task(task_id)
    assert (task.status, task.block_kind, task.failure_count) == (
        Status.BLOCKED,
        BlockKind.GAVE_UP,
        2,
    )
    assert task.max_retries == 1  # ours counts the retries after the first failure
    assert "gave up after 2 failures" in (task.block_reason or "")
    kinds = [e.kind for e in b.events(task_id)]
    assert kinds.count("reclaimed") == 1 and kinds[-1] == "gave_up"


def test_open_runs_are_only_the_cli_lanes(hermes_store: HermesStore) -> None:
    from hermes_cli import kanban_db

    profile = add(hermes_store, "p", assignee="default")
    add(hermes_store, "ours", assignee="cli-auto")
    b = board(hermes_store)
    connection = kanban_db.connect(db_path=b.path)
    try:  # Hermes's own dispatcher claims its profile's task
        assert kanban_db.claim_task(connection, profile, ttl_seconds=1, claimer="host:1")
    finally:
        connection.close()
    ours = b.claim(NODE, 1, "")
    assert ours is not None
    time.sleep(2.1)
    assert [r.id for r in b.running_runs()] == [ours.run.id]
    assert [r.id for r in b.expired_runs()] == [ours.run.id]


# -- what Hermes gives the worker ---------------------------------------------------


def test_workspaces_of_each_kind_are_made_and_written_back(
    hermes_home: HermesHome, hermes_store: HermesStore, tmp_path: Path
) -> None:
    repo = repository(tmp_path / "repo")
    folder = tmp_path / "folder"
    ids = {
        "dir": hermes_home.create("d", "--assignee", "cli-auto", "--workspace", f"dir:{folder}"),
        "dir-repo": hermes_home.create(
            "r", "--assignee", "cli-auto", "--workspace", f"dir:{repo}"
        ),
        "worktree": hermes_home.create(
            "w",
            "--assignee",
            "cli-auto",
            "--workspace",
            f"worktree:{repo}",
            "--goal",
            "--goal-max-turns",
            "3",
        ),
        "scratch": hermes_home.create("s", "--assignee", "cli-auto"),
    }
    b = board(hermes_store)
    locked: list[Path] = []

    @contextlib.contextmanager
    def creating(repository: Path) -> Iterator[None]:
        locked.append(repository)
        yield

    assert b.prepare_workspace(ids["dir"], creating) == HostWorkspace(folder, shared=True)
    assert folder.is_dir()
    assert b.prepare_workspace(ids["dir-repo"], creating) == HostWorkspace(repo, shared=True)
    assert not (repo / ".worktrees").exists()  # a repository's is the runner's to make
    worktree = b.prepare_workspace(ids["worktree"], creating).path
    assert worktree == repo / ".worktrees" / ids["worktree"] and (worktree / ".git").exists()
    assert locked == [repo]  # Hermes made its worktree under the runner's creation lock
    scratch = b.prepare_workspace(ids["scratch"], creating).path
    assert scratch.is_dir() and hermes_home.path in scratch.parents
    b.record_workspace(ids["dir-repo"], tmp_path / "elsewhere")
    rows = {r["id"]: r for r in hermes(hermes_store, "SELECT * FROM tasks")}
    assert rows[ids["worktree"]]["workspace_path"] == str(worktree)
    assert rows[ids["worktree"]]["branch_name"] == f"wt/{ids['worktree']}"
    assert rows[ids["scratch"]]["workspace_path"] == str(scratch)
    assert rows[ids["dir-repo"]]["workspace_path"] == str(tmp_path / "elsewhere")
    assert b.get_task(ids["worktree"]).goal_turns == 3
    assert b.get_task(ids["dir"]).goal_turns == 1
    context = b.worker_context(ids["worktree"])
    assert context.startswith(f"# Kanban task {ids['worktree']}: w")


def test_the_provider_log_is_where_hermes_looks_for_a_workers_log(
    hermes_home: HermesHome, hermes_store: HermesStore, tmp_path: Path
) -> None:
    task_id = hermes_home.create("t", "--assignee", "cli-auto")
    b = board(hermes_store)
    theirs = hermes_home.path / "kanban" / "logs" / f"{task_id}.log"
    theirs.parent.mkdir(parents=True, exist_ok=True)
    theirs.write_text("a Hermes worker was here\n")  # an earlier run of a Hermes profile
    ours = tmp_path / "logs" / "default" / f"{task_id}.log"
    ours.parent.mkdir(parents=True)
    ours.write_text("codex said this\n")
    b.link_worker_log(task_id, ours)
    b.link_worker_log(task_id, ours)  # again, at the next run: nothing changes
    assert hermes_home.hermes("log", task_id) == "codex said this\n"
    assert theirs.with_name(f"{task_id}.log.1").read_text() == "a Hermes worker was here\n"
