"""The board side of the operator controls, on every backend: stop requests, board pauses,
a task's own retry limit; and the migration that adds them to boards made before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from lane_runner.board.base import Board, Store
from lane_runner.board.model import BlockKind, NewTask, Outcome, Status
from lane_runner.board.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.sql.schema import CONTROLS_STEP
from lane_runner.board.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from lane_runner.board.sqlite import SqliteStore
from lane_runner.errors import UsageError
from tests.board.hermes_backend import NO_CONTROLS, READ_ONLY_ADD, not_on_hermes

NODE = "node-a"
TTL = 60.0


@not_on_hermes(NO_CONTROLS)
def test_stop_request_is_recorded_on_the_current_run_only(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    with pytest.raises(UsageError, match="not running"):
        board.request_stop("t", "why", requeue=False)
    claim = board.claim(NODE, TTL, "cli-auto")
    assert claim is not None and board.stop_request(claim.run.id) is None
    run = board.request_stop("t", "wrong approach", requeue=True)
    assert run.id == claim.run.id and run.stop is not None and run.stop.requeue
    found = board.stop_request(claim.run.id)
    assert found is not None and (found.reason, found.requeue) == ("wrong approach", True)
    assert board.get_task("t").status is Status.RUNNING  # the runner carries it out
    assert board.events("t")[-1].kind == "stop_requested"
    assert board.reclaim(claim.run.id, "stopped", Outcome.RECLAIMED)
    assert board.stop_request(claim.run.id) is None  # an ended run has nothing to stop


@not_on_hermes(NO_CONTROLS)
def test_board_pause_refuses_claims_until_resumed(open_store: object) -> None:
    stores = [open_store(), open_store()]  # type: ignore[operator]
    first: Store = stores[0]
    first.create_board("main").add_task(NewTask(title="t", id="t"))
    other = stores[1].board("main")  # another runner of the same board
    paused = first.board("main").pause("migration", "ops")
    assert other.paused() == paused
    assert other.claim(NODE, TTL, "cli-auto") is None
    assert other.get_task("t").status is Status.READY
    assert other.resume() and not other.resume()
    assert first.board("main").paused() is None
    assert other.claim(NODE, TTL, "cli-auto") is not None


@pytest.mark.parametrize(("max_retries", "runs"), [(0, 1), (1, 2), (None, 3)])
def test_max_retries_overrides_the_failure_limit(
    board: Board, max_retries: int | None, runs: int
) -> None:
    board.add_task(NewTask(title="t", id="t", max_retries=max_retries))
    assert board.get_task("t").max_retries == max_retries
    for _ in range(runs):
        claim = board.claim(NODE, TTL, "cli-auto")
        assert claim is not None
        board.reclaim(claim.run.id, "crash", Outcome.FAILED, count_failure=True)
    task = board.get_task("t")
    assert (task.status, task.block_kind, task.failure_count) == (
        Status.BLOCKED, BlockKind.GAVE_UP, runs,
    )


@not_on_hermes(READ_ONLY_ADD)
def test_max_retries_is_checked(board: Board) -> None:
    with pytest.raises(UsageError, match="max retries"):
        board.add_task(NewTask(title="t", max_retries=-1))


def test_an_sqlite_board_from_before_the_controls_is_migrated(tmp_path: Path) -> None:
    boards = tmp_path / "boards"
    boards.mkdir()
    connection = sqlite3.connect(boards / "old.db", isolation_level=None)
    before = SQLITE_MIGRATIONS.index(CONTROLS_STEP)  # every later step runs at the upgrade
    for step in SQLITE_MIGRATIONS[:before]:
        for statement in step:
            connection.execute(statement)  # type: ignore[arg-type]
    connection.execute(f"PRAGMA user_version = {before}")
    connection.execute(
        "INSERT INTO tasks (id, title, body, status, priority, goal_turns, created_at, "
        "updated_at) VALUES ('kept', 'from before', '', 'ready', 0, 1, 1.0, 1.0)"
    )
    connection.close()
    store = SqliteStore(boards)
    try:
        board = store.board("old")
        assert board.get_task("kept").max_retries is None
        board.pause("after the upgrade", "ops")
        assert board.claim(NODE, TTL, "cli-auto") is None
        board.resume()
        claim = board.claim(NODE, TTL, "cli-auto")
        assert claim is not None and claim.task.id == "kept"
        assert board.request_stop("kept", "checked", requeue=False).stop is not None
    finally:
        store.close()


def test_a_postgres_board_from_before_the_controls_is_migrated(postgres_database: str) -> None:
    with psycopg.connect(postgres_database, autocommit=True) as connection:
        before = PG_MIGRATIONS.index(CONTROLS_STEP)  # every later step runs at the upgrade
        for step in PG_MIGRATIONS[:before]:
            for statement in step:
                connection.execute(statement)  # type: ignore[arg-type]
        connection.execute("UPDATE schema_version SET version = %s", (before,))
        connection.execute("INSERT INTO boards VALUES ('old', 0, 1.0)")
        connection.execute(
            "INSERT INTO tasks (board, id, title, body, status, priority, goal_turns, "
            "created_at, updated_at) VALUES ('old', 'kept', 't', '', 'ready', 0, 1, 1.0, 1.0)"
        )
    store = PostgresStore(postgres_database)
    try:
        board = store.board("old")
        assert board.get_task("kept").max_retries is None
        board.pause("after the upgrade", "ops")
        assert board.claim(NODE, TTL, "cli-auto") is None
        board.resume()
        assert board.claim(NODE, TTL, "cli-auto") is not None
    finally:
        store.close()
