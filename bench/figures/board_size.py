"""Claim latency as the board grows: 1,000 vs 100,000 finished tasks, SQLite and PostgreSQL.

A board keeps every finished task (with its runs and events), so a claim must not
pay for the history. Each board gets one task done through the API (add, claim,
complete), which is then copied in SQL into N finished tasks with their runs and
events, and the statistics refreshed (as autovacuum or SQLite's own would be for
a board that grew over months). Then one task at a time is added and claimed;
the ``claim()`` call is timed, completing it is not.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from bench.claimer import RESULT
from bench.postgres import database, unavailable
from bench.result import Check, Figure, median, ms, percentile, ratio
from bench.scale import Scale
from lane_runner.board.base import Board
from lane_runner.board.model import NewTask
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.sqlite import SqliteStore

TARGET = 1.5
BOARD = "history"
NODE = "bench"


def _finish_one(board: Board) -> None:
    board.add_task(NewTask(title="template", body="the finished task every copy is made of"))
    claim = board.claim(NODE, 60.0, "cli-auto")
    assert claim is not None
    board.complete(claim.run.id, RESULT, "done")


def _copies(columns: list[str], replace: dict[str, str]) -> tuple[str, str]:
    """The column list and the SELECT list of an INSERT ... SELECT that copies rows."""
    return ", ".join(columns), ", ".join(replace.get(column, column) for column in columns)


def _copy_sql(columns: dict[str, list[str]], series: str, offset: int) -> list[str]:
    task_id = "(t.id || '-' || g.n)"
    statements = []
    for table, replace in (
        ("tasks", {"id": task_id, "completed_run_id": f"({offset} + g.n)"}),
        ("runs", {"id": f"({offset} + g.n)", "task_id": "(r.task_id || '-' || g.n)"}),
        ("events", {"task_id": "(e.task_id || '-' || g.n)", "run_id": f"({offset} + g.n)"}),
    ):
        alias = table[0]
        names, values = _copies(columns[table], replace)
        values = ", ".join(
            value if value.startswith("(") else f"{alias}.{value}" for value in values.split(", ")
        )
        source = {"tasks": "t", "runs": "r", "events": "e"}[table]
        statements.append(
            f"INSERT INTO {table} ({names}) SELECT {values} FROM {table} {source} "
            f"CROSS JOIN {series} WHERE {source}.{'id' if table == 'tasks' else 'task_id'} "
            "= 'TEMPLATE'"
        )
    return statements


def fill_postgres(url: str, board: Board, count: int) -> None:
    _finish_one(board)
    with psycopg.connect(url, autocommit=False) as connection:
        template = connection.execute("SELECT id FROM tasks").fetchone()[0]  # type: ignore[index]
        offset = connection.execute("SELECT max(id) FROM runs").fetchone()[0]  # type: ignore[index]
        columns = {
            table: [
                row[0]
                for row in connection.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND is_identity = 'NO' ORDER BY ordinal_position",
                    (table,),
                )
            ]
            for table in ("tasks", "runs", "events")
        }
        series = f"generate_series(1, {count - 1}) AS g(n)"
        for statement in _copy_sql(columns, series, offset):
            connection.execute(statement.replace("'TEMPLATE'", "%s"), (template,))
        # The next claim's run id, past the copies' (the board's run id sequence).
        connection.execute("SELECT setval('lane_runner_run_ids', %s)", (offset + count,))
        connection.commit()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")


def fill_sqlite(path: Path, board: Board, count: int) -> None:
    _finish_one(board)
    connection = sqlite3.connect(path)
    try:
        template = connection.execute("SELECT id FROM tasks").fetchone()[0]
        offset = connection.execute("SELECT max(id) FROM runs").fetchone()[0]
        columns = {
            table: [
                row[1]
                for row in connection.execute(f"PRAGMA table_info({table})")
                if not (row[5] and table != "tasks")  # the INTEGER PRIMARY KEY counts itself
            ]
            for table in ("tasks", "runs", "events")
        }
        columns["runs"].insert(0, "id")  # copies take run ids of their own
        series = (
            "(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
            f"WHERE n < {count - 1}) SELECT n FROM s) AS g"
        )
        with connection:
            for statement in _copy_sql(columns, series, offset):
                connection.execute(statement.replace("'TEMPLATE'", "?"), (template,))
        connection.execute("ANALYZE")
        # The copies went through the WAL: write them back now, not in the timed claims.
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


def _check_filled(board: Board, count: int) -> None:
    done = board.counts()["done"]
    if done != count or len(board.events()) < 2 * count:
        raise RuntimeError(f"the board holds {done} finished tasks, not {count}")


def claim_seconds(board: Board, samples: int) -> list[float]:
    timings = []
    for index in range(samples):
        board.add_task(NewTask(title=f"sample {index}", body=""))
        started = time.perf_counter()
        claim = board.claim(NODE, 60.0, "cli-auto")
        timings.append(time.perf_counter() - started)
        assert claim is not None and claim.task.title == f"sample {index}"
        board.complete(claim.run.id, RESULT, "done")
    return timings


@contextmanager
def sqlite_board(root: Path, count: int) -> Iterator[Board]:
    root.mkdir(parents=True)
    store = SqliteStore(root)
    try:
        board = store.create_board(BOARD)
        fill_sqlite(root / f"{BOARD}.db", board, count)
        _check_filled(board, count)
        yield board
    finally:
        store.close()


@contextmanager
def postgres_board(root: Path, count: int) -> Iterator[Board]:
    with database("bench_history") as url:
        store = PostgresStore(url)
        try:
            board = store.create_board(BOARD)
            fill_postgres(url, board, count)
            _check_filled(board, count)
            yield board
        finally:
            store.close()


def measure(scale: Scale, workdir: Path) -> Figure:
    small, large = scale.board_sizes
    figure = Figure(
        key="board_size",
        title="Claim latency as the board grows",
        baseline=f"the same board with {small:,} finished tasks, in the same run",
        columns=["board", "finished tasks", "claim p50", "p99", "p50 vs baseline"],
    )
    backends: list[tuple[str, Callable[[Path, int], Any]]] = [("SQLite", sqlite_board)]
    why_not = unavailable()
    if why_not:
        figure.notes.append(f"PostgreSQL skipped: {why_not}.")
    else:
        backends.append(("PostgreSQL", postgres_board))
    for name, make in backends:
        timings = {}
        for count in (small, large):
            with make(workdir / f"{name}-{count}", count) as board:
                claim_seconds(board, 3)  # warm the connections and caches
                timings[count] = claim_seconds(board, scale.claim_samples)
        growth = median(timings[large]) / median(timings[small])
        for count in (small, large):
            figure.rows.append([
                name, f"{count:,}", ms(median(timings[count])),
                ms(percentile(timings[count], 99)),
                ratio(median(timings[count]), median(timings[small])),
            ])
        figure.checks.append(
            Check(f"{name}: claim p50 with {large:,} ≤ 1.5 × with {small:,} finished tasks",
                  f"{growth:.2f}×", growth <= TARGET)
        )
    figure.notes.append(
        f"{scale.claim_samples} claims per board after 3 untimed ones; each claim is the only "
        "ready task. Finished tasks are copies of one task done through the API, with its run "
        "and events."
    )
    return figure
