"""A fleet on one PostgreSQL: one round trip per hot transition, connection budgets,
a schema from before the functions upgraded in place, and the configuration keys."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from lane_runner.board import open_store
from lane_runner.board.model import CompleteOutcome, NewTask
from lane_runner.board.pg_transitions import TRANSITIONS_STEP
from lane_runner.board.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresStore
from lane_runner.board.sql import USAGE_STEP
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
    """Sessions on the test database, not counting the ones that look (this one's kind)."""
    name = url.rpartition("/")[2]
    with psycopg.connect(url, autocommit=True, application_name=OBSERVER) as observer:
        row = observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
            "AND application_name <> %s",
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


def test_a_board_from_before_the_functions_is_upgraded_in_place(postgres_database: str) -> None:
    """A board from before the functions, with a running task: the new code installs the
    functions when it first connects, and renews and completes the run through them."""
    old = PostgresStore(postgres_database, server_transitions=False)
    try:
        board = old.create_board("main")
        board.add_task(NewTask(title="t", assignee="cli-auto"))
        claimed = board.claim("n", 60.0, "")
    finally:
        old.close()
    assert claimed is not None
    # Back to the schema before the functions (and the usage table, a later step).
    before = MIGRATIONS.index(TRANSITIONS_STEP)
    assert MIGRATIONS[before + 1:] == (USAGE_STEP,), "undo the later steps here too"
    with psycopg.connect(postgres_database, autocommit=True) as connection:
        for name in ("lane_runner_claim", "lane_runner_heartbeat", "lane_runner_complete"):
            connection.execute(f"DROP FUNCTION {name}")
        connection.execute("DROP TABLE usage")
        connection.execute("UPDATE schema_version SET version = %s", (before,))
    new = PostgresStore(postgres_database)
    try:
        board = new.board("main")
        assert board.heartbeat(claimed.run.id, 60.0)
        assert board.complete(claimed.run.id, RESULT, "ok") is CompleteOutcome.COMPLETED
    finally:
        new.close()
    with psycopg.connect(postgres_database) as connection:
        assert connection.execute("SELECT version FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )


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
