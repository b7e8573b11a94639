"""A reviewer's run of its own on the SQL boards (issue 41, ``ReviewRuns``): begun beside
the implementer's run, leased while that run is its task's, ended with its verdict or by
whatever ends the run it reviews; and the migration that adds it to boards made before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from lane_runner.board.base import Board, ReviewRuns
from lane_runner.board.model import REVIEW_ROLE, CompleteOutcome, NewTask, Outcome, Status
from lane_runner.board.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.sql.schema import REVIEW_RUN_COLUMNS
from lane_runner.board.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from lane_runner.board.sqlite import SqliteStore
from tests.board.hermes_backend import not_on_hermes

NODE, OTHER = "node-a", "node-b"
TTL = 60.0
HOSTED = "Hermes's reviews are its own column's runs (board/hermes/reviews.py)"


def _review_step(migrations: object) -> int:
    """The index of the step that adds the review runs' columns."""
    steps = list(migrations)  # type: ignore[call-overload]
    return next(n for n, step in enumerate(steps) if REVIEW_RUN_COLUMNS[0] in step)


@not_on_hermes(HOSTED)
def test_a_review_run_is_a_run_of_its_own_beside_the_implementers(board: Board) -> None:
    assert isinstance(board, ReviewRuns)
    board.add_task(NewTask(title="t", id="t"))
    claim = board.claim(NODE, TTL, "cli-auto")
    assert claim is not None
    review = board.start_review_run(claim.run.id, OTHER, TTL)
    assert review is not None and review.id > claim.run.id
    assert (review.role, review.for_run, review.node) == (REVIEW_ROLE, claim.run.id, OTHER)
    task = board.get_task("t")
    assert task.status is Status.RUNNING and task.current_run_id == claim.run.id
    # Its own lease, renewed while the run it reviews is the task's.
    assert board.heartbeat(review.id, TTL)
    assert [(r.id, r.role) for r in board.runs("t")] == [(claim.run.id, "implement"),
                                                          (review.id, REVIEW_ROLE)]
    assert board.end_review_run(review.id, Outcome.REVIEWED, "approve: fine")
    assert not board.end_review_run(review.id, Outcome.REVIEWED, "again")  # once
    assert not board.heartbeat(review.id, TTL)
    ended = board.runs("t")[-1]
    assert (ended.outcome, ended.reason) == (Outcome.REVIEWED, "approve: fine")
    assert board.get_task("t").current_run_id == claim.run.id  # the task's run goes on


@not_on_hermes(HOSTED)
def test_whatever_ends_the_implementers_run_ends_its_review_run(board: Board) -> None:
    assert isinstance(board, ReviewRuns)
    board.add_task(NewTask(title="t", id="t"))
    claim = board.claim(NODE, TTL, "cli-auto")
    assert claim is not None
    review = board.start_review_run(claim.run.id, NODE, TTL)
    assert review is not None
    assert board.reclaim(claim.run.id, "lease expired", Outcome.EXPIRED)
    left = {run.id: run for run in board.runs("t")}[review.id]
    assert left.ended_at is not None and left.outcome is Outcome.EXPIRED
    assert not board.heartbeat(review.id, TTL)
    # A run no longer the task's gets no review run.
    assert board.start_review_run(claim.run.id, NODE, TTL) is None


@not_on_hermes(HOSTED)
def test_a_review_run_neither_completes_its_task_nor_stands_in_a_replays_way(
    board: Board,
) -> None:
    assert isinstance(board, ReviewRuns)
    result = {"status": "completed", "summary": "s"}
    board.add_task(NewTask(title="t", id="t"))
    claim = board.claim(NODE, TTL, "cli-auto")
    assert claim is not None
    review = board.start_review_run(claim.run.id, NODE, TTL)
    assert review is not None
    assert board.complete(review.id, result, "s") is CompleteOutcome.STALE
    assert board.end_review_run(review.id, Outcome.REVIEWED, "approve")
    # The implementer's runner died with the approved answer journaled: its run is
    # reclaimed, and the journal's replay still completes the task with it.
    assert board.reclaim(claim.run.id, "restart", Outcome.RECLAIMED)
    assert board.complete(claim.run.id, result, "s") is CompleteOutcome.REPLAYED
    assert board.get_task("t").completed_run_id == claim.run.id


@not_on_hermes(HOSTED)
def test_a_completion_ends_a_review_run_left_open_without_completing_it(board: Board) -> None:
    assert isinstance(board, ReviewRuns)
    board.add_task(NewTask(title="t", id="t"))
    claim = board.claim(NODE, TTL, "cli-auto")
    assert claim is not None
    review = board.start_review_run(claim.run.id, NODE, TTL)
    assert review is not None
    done = board.complete(claim.run.id, {"status": "completed", "summary": "s"}, "s")
    assert done is CompleteOutcome.COMPLETED
    left = {run.id: run for run in board.runs("t")}[review.id]
    assert left.outcome is Outcome.RECLAIMED and left.ended_at is not None


@not_on_hermes(HOSTED)
def test_recovery_ends_only_its_own_nodes_leftover_review_runs(board: Board) -> None:
    assert isinstance(board, ReviewRuns)
    for name in ("a", "b"):
        board.add_task(NewTask(title=name, id=name))
    runs = [board.claim(NODE, TTL, "cli-auto"), board.claim(OTHER, TTL, "cli-auto")]
    mine, theirs = (board.start_review_run(c.run.id, c.run.node, TTL) for c in runs if c)
    assert mine is not None and theirs is not None
    ended = board.end_leftover_review_runs(NODE)
    assert [run.id for run in ended] == [mine.id]
    assert ended[0].outcome is Outcome.RECLAIMED
    assert board.heartbeat(theirs.id, TTL) and not board.heartbeat(mine.id, TTL)
    assert all(board.get_task(t).status is Status.RUNNING for t in ("a", "b"))


def test_an_sqlite_board_from_before_review_runs_is_migrated(tmp_path: Path) -> None:
    boards = tmp_path / "boards"
    boards.mkdir()
    connection = sqlite3.connect(boards / "old.db", isolation_level=None)
    before = _review_step(SQLITE_MIGRATIONS)
    for step in SQLITE_MIGRATIONS[:before]:
        for statement in step:
            statement(connection) if callable(statement) else connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {before}")
    connection.execute(
        "INSERT INTO tasks (id, title, body, status, priority, goal_turns, created_at, "
        "updated_at) VALUES ('kept', 'from before', '', 'ready', 0, 1, 1.0, 1.0)"
    )
    connection.close()
    store = SqliteStore(boards)
    try:
        _review_after_upgrade(store.board("old"))
    finally:
        store.close()


def test_a_postgres_board_from_before_review_runs_is_migrated(postgres_database: str) -> None:
    with psycopg.connect(postgres_database, autocommit=True) as connection:
        before = _review_step(PG_MIGRATIONS)
        for step in PG_MIGRATIONS[:before]:
            for statement in step:
                connection.execute(statement)  # type: ignore[arg-type]
        connection.execute("UPDATE schema_version SET version = %s", (before,))
        connection.execute("INSERT INTO boards (slug, created_at) VALUES ('old', 1.0)")
        connection.execute(
            "INSERT INTO tasks (board, id, title, body, status, priority, goal_turns, "
            "created_at, updated_at) VALUES ('old', 'kept', 't', '', 'ready', 0, 1, 1.0, 1.0)"
        )
    store = PostgresStore(postgres_database)
    try:
        _review_after_upgrade(store.board("old"))
    finally:
        store.close()


def _review_after_upgrade(board: Board) -> None:
    """A claim from before reads as an implementer's; a review run leases and ends
    ``reviewed`` (the widened outcome check) on the upgraded board."""
    assert isinstance(board, ReviewRuns)
    claim = board.claim(NODE, TTL, "cli-auto")
    assert claim is not None and claim.run.role == "implement"
    review = board.start_review_run(claim.run.id, NODE, TTL)
    assert review is not None and board.heartbeat(review.id, TTL)
    assert board.end_review_run(review.id, Outcome.REVIEWED, "approve")
    assert [r.role for r in board.runs("kept")] == ["implement", REVIEW_ROLE]
