"""A fleet on one PostgreSQL: one round trip per hot transition, connection budgets,
schemas from before the functions and the gate upgraded in place, and the configuration
keys."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from lane_runner.board import open_store
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import CompleteOutcome, NewTask
from lane_runner.board.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.postgres.transitions import LANES
from lane_runner.board.sql.schema import upgrade
from lane_runner.config import load
from lane_runner.errors import UsageError

RESULT = {"status": "completed", "summary": "ok"}
OBSERVER = "lane-runner-test-observer"


class RoundTrips:
    """Counts what a store sends from the test's own thread: statements, BEGIN and
    COMMIT, the pool's checks. The store's listening thread (its LISTEN, a reconnect)
    is not the transition's: counted, it made a claim 3 on a loaded machine."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._count = 0
        self._thread = threading.get_ident()
        execute = psycopg.Connection.execute
        transaction = psycopg.Connection.transaction
        check = ConnectionPool.check_connection

        def counted_execute(connection: Any, *args: Any, **kwargs: Any) -> Any:
            self.add(1)
            return execute(connection, *args, **kwargs)

        def counted_transaction(connection: Any, *args: Any, **kwargs: Any) -> Any:
            self.add(2)  # BEGIN and COMMIT (or ROLLBACK)
            return transaction(connection, *args, **kwargs)

        def counted_check(connection: Any) -> None:
            self.add(1)
            check(connection)

        monkeypatch.setattr(psycopg.Connection, "execute", counted_execute)
        monkeypatch.setattr(psycopg.Connection, "transaction", counted_transaction)
        monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counted_check))

    def add(self, trips: int) -> None:
        if threading.get_ident() == self._thread:
            self._count += trips

    def of(self, action: Callable[[], Any]) -> int:
        before = self._count
        action()
        return self._count - before


@pytest.fixture
def store(postgres_database: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(postgres_database)
    yield opened
    opened.close()


def test_claim_heartbeat_stop_look_and_completion_are_one_round_trip_each(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = store.create_board("main")
    for index in range(3):
        board.add_task(NewTask(title=f"t{index}", assignee="cli-auto"))
    trips = RoundTrips(monkeypatch)
    claims: list[Any] = []
    assert trips.of(lambda: claims.append(board.claim("n", 60.0, ""))) == 1
    run = claims[0].run.id
    assert trips.of(lambda: board.heartbeat(run, 60.0)) == 1
    assert trips.of(lambda: board.stop_request(run)) == 1  # read at every heartbeat
    assert trips.of(lambda: board.complete(run, RESULT, "ok")) == 1
    assert board.complete(run, RESULT, "ok") is CompleteOutcome.DUPLICATE
    assert trips.of(lambda: board.claim("n", 60.0, "")) == 1  # the pooled connection, unchecked


def _connections(url: str) -> int:
    """Clients' sessions on the test database, not counting the ones that look (this one's
    kind), nor the server's own (an autovacuum worker the test's writes woke up: CI saw
    one counted against a budget of one)."""
    name = url.rpartition("/")[2]
    with psycopg.connect(url, autocommit=True, application_name=OBSERVER) as observer:
        row = observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
            "AND backend_type = 'client backend' AND application_name <> %s",
            (name, OBSERVER),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_a_busy_runner_holds_no_more_connections_than_its_budget(
    postgres_database: str, budget: int
) -> None:
    store = PostgresStore(postgres_database, connections=budget)
    try:
        board = store.create_board("main")
        for index in range(40):
            board.add_task(NewTask(title=f"t{index}", assignee="cli-auto"))
        held: list[int] = []
        start = threading.Barrier(8)

        def worker() -> None:
            start.wait()
            while (claimed := board.claim("n", 60.0, "")) is not None:
                board.heartbeat(claimed.run.id, 60.0)
                held.append(_connections(postgres_database))
                board.complete(claimed.run.id, RESULT, "ok")

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert board.counts()["done"] == 40
        assert 1 <= max(held) <= budget
    finally:
        store.close()


def test_one_connection_means_no_listener_and_a_bounded_poll(postgres_database: str) -> None:
    watcher = PostgresStore(postgres_database, connections=1)
    writer = PostgresStore(postgres_database)
    try:
        watcher.create_board("main")
        assert watcher.wait_for_change(0)  # its own create
        assert not watcher.wait_for_change(0.05)
        writer.board("main").add_task(NewTask(title="t"))
        assert watcher.wait_for_change(30)  # a poll's look, at most a second later
        assert _connections(postgres_database) <= 1 + 3
    finally:
        watcher.close()
        writer.close()


@pytest.mark.parametrize(
    "version", [4, 5, 7], ids=["before-the-functions", "before-the-gate", "before-the-skip"]
)
def test_an_older_board_is_upgraded_in_place(postgres_database: str, version: int) -> None:
    """A board at schema 4 (no functions), 5 (functions, run ids from the board's row) or
    7 (a claim that skips no workspace) with a running task, its run 7: the new code brings
    it up to date when it first connects, renews and completes the run through the
    functions, hands out run ids past every one given before, and leaves one claim
    function."""
    with psycopg.connect(postgres_database) as connection:
        upgrade(connection, 0, MIGRATIONS[:version], "the test's database")
        connection.execute("UPDATE schema_version SET version = %s", (version,))
        if version < 6:
            connection.execute("INSERT INTO boards (slug, next_run_id, created_at) VALUES "
                               "('main', 7, 0)")
        else:
            connection.execute("INSERT INTO boards (slug, created_at) VALUES ('main', 0)")
            connection.execute("SELECT setval('lane_runner_run_ids', 7)")
        for task_id, status, run in (("t1", "running", 7), ("t2", "ready", None)):
            connection.execute(
                "INSERT INTO tasks (board, id, title, body, status, assignee, priority, "
                "goal_turns, current_run_id, created_at, updated_at) VALUES "
                "('main', %s, 't', '', %s, 'cli-auto', 0, 1, %s, 0, 0)",
                (task_id, status, run),
            )
        connection.execute(
            "INSERT INTO runs (board, id, task_id, node, claimed_at, lease_expires_at, "
            "heartbeat_at) VALUES ('main', 7, 't1', 'n', 0, 1e12, 0)"
        )
    new = PostgresStore(postgres_database)
    try:
        board = new.board("main")
        assert board.heartbeat(7, 60.0)
        assert board.complete(7, RESULT, "ok") is CompleteOutcome.COMPLETED
        claimed = board.claim("n", 60.0, "")
        assert claimed is not None and claimed.task.id == "t2" and claimed.run.id == 8
    finally:
        new.close()
    with psycopg.connect(postgres_database) as connection:
        assert connection.execute("SELECT version FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )
        claims = "SELECT count(*) FROM pg_proc WHERE proname = 'lane_runner_claim'"
        assert connection.execute(claims).fetchone() == (1,)


def hold_a_claim(held: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
    """A claim of board ``main`` on ``held``, left uncommitted: its transaction holds the
    board's gate, shared, and its event is not settled until it ends. The claimed task's
    id, or None."""
    return held.execute(
        "SELECT t_id FROM lane_runner_claim('main', 'held', 60, '', %s, '{}', NULL, '10s', "
        "'{}', 'none')", (LANES,),
    ).fetchone()


def test_a_follower_never_skips_an_event_committed_out_of_order(
    postgres_database: str,
) -> None:
    """Claims commit side by side, so a claim's event may commit after a later-numbered
    one. A claim held open in the middle (the gate shared, its event id taken) while
    another commits: a reader of the board's events waits for the first to settle and
    then sees both, so a follower that remembers the last id it saw misses neither."""
    store = PostgresStore(postgres_database)
    try:
        board = store.create_board("main")
        for title in ("first", "second"):
            board.add_task(NewTask(title=title, assignee="cli-auto"))
        seen = board.events()[-1].id
        with psycopg.connect(postgres_database) as held:  # a transaction of its own
            first = hold_a_claim(held)
            second = board.claim("n", 60.0, "")
            assert first is not None and second is not None
            read: list[list[Any]] = []
            reader = threading.Thread(target=lambda: read.append(board.events(after_id=seen)))
            reader.start()
            reader.join(timeout=0.5)  # it waits for the held claim to commit
            held.commit()
        reader.join(timeout=30)
        assert [(e.task_id, e.kind) for e in read[0]] == [
            (first[0], "claimed"), (second.task.id, "claimed")
        ]
    finally:
        store.close()


def test_a_board_s_events_wait_no_longer_than_the_budget(postgres_database: str) -> None:
    """A claim that never ends (here a transaction held open mid-claim) keeps the board's
    events unsettled: a reader of them gives up after its wait budget, BoardUnavailable,
    as every board operation does, rather than waiting on."""
    store = PostgresStore(postgres_database, wait_budget=0.3)
    try:
        board = store.create_board("main")
        board.add_task(NewTask(title="t", assignee="cli-auto"))
        with psycopg.connect(postgres_database) as held:
            hold_a_claim(held)
            with pytest.raises(BoardUnavailable):
                board.events()
            held.rollback()
        assert [e.kind for e in board.events()] == ["created"]
    finally:
        store.close()


def test_a_task_s_events_are_read_without_waiting_for_other_tasks(
    postgres_database: str,
) -> None:
    """A task's own events are written under its row lock, so they commit in id order: a
    reader of one task's events does not wait for another task's claim in flight."""
    store = PostgresStore(postgres_database)
    try:
        board = store.create_board("main")
        other, mine = (board.add_task(NewTask(title=t, assignee="cli-auto")) for t in "ab")
        with psycopg.connect(postgres_database) as held:  # holds the gate, shared, for now
            claimed = hold_a_claim(held)
            assert claimed == (other.id,)
            assert [e.kind for e in board.events(mine.id)] == ["created"]
            held.rollback()
    finally:
        store.close()


def test_the_budget_and_pooler_keys_reach_the_store(
    tmp_path: Path, postgres_database: str
) -> None:
    environ = {
        "LANE_RUNNER_BOARD_URL": postgres_database,
        "LANE_RUNNER_BOARD_CONNECTIONS": "2",
        "LANE_RUNNER_BOARD_POOLER": "transaction",
        "LANE_RUNNER_BOARD_LISTEN_URL": postgres_database,
    }
    store = open_store(load(tmp_path, environ=environ))
    try:
        assert isinstance(store, PostgresStore)
        store.create_board("main")
        assert _connections(postgres_database) <= 2
    finally:
        store.close()
    with pytest.raises(UsageError, match="board_listen_url must start with postgresql://"):
        open_store(load(tmp_path, environ={**environ, "LANE_RUNNER_BOARD_LISTEN_URL": "pgb:x"}))


def test_closing_the_store_under_a_waiting_listener_is_no_lost_listener(
    postgres_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A clean stop closes the store while the daemon's watcher waits on the LISTEN
    connection: that is no lost listener, and nothing reconnects."""
    store = PostgresStore(postgres_database)
    store.create_board("main")
    assert store.wait_for_change(0)  # its own create; the listener is connected now
    heard: list[bool] = []
    watcher = threading.Thread(target=lambda: heard.append(store.wait_for_change(30)))
    with caplog.at_level(logging.DEBUG, logger="lane_runner.board.postgres"):
        watcher.start()
        time.sleep(0.3)  # into its wait (an earlier close is the same to the assertions)
        store.close()
        watcher.join(timeout=60)
    assert not watcher.is_alive()
    assert heard == [False]
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == [], warned
