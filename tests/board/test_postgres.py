"""What only the PostgreSQL store does: selection by URL, schema versions, outages."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from lane_runner.board import open_store
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import NewTask
from lane_runner.board.postgres.schema import SCHEMA_VERSION
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.sql.dialect import pyformat
from lane_runner.config import load

UNREACHABLE = "postgresql://postgres:secret@127.0.0.1:1/nowhere"  # nothing listens on port 1


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_board_url_selects_postgres(tmp_path: Path, postgres_database: str, scheme: str) -> None:
    url = postgres_database.replace("postgresql://", f"{scheme}://", 1)
    store = open_store(load(tmp_path, environ={"LANE_RUNNER_BOARD_URL": url}))
    try:
        assert isinstance(store, PostgresStore)
        store.create_board("main")
        assert list(store.board_slugs()) == ["main"]
    finally:
        store.close()
    assert not (tmp_path / "boards" / "main.db").exists()


def test_schema_is_versioned_and_a_newer_one_is_refused(postgres_database: str) -> None:
    store = PostgresStore(postgres_database)
    store.create_board("main")
    store.close()
    with psycopg.connect(postgres_database, autocommit=True) as connection:
        row = connection.execute("SELECT version FROM schema_version").fetchone()
        assert row == (SCHEMA_VERSION,)
        connection.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    newer = PostgresStore(postgres_database)
    try:
        with pytest.raises(BoardUnavailable, match="upgrade lane-runner"):
            newer.board_slugs()
    finally:
        newer.close()


def test_unreachable_server_is_unavailable_and_says_where_without_the_password() -> None:
    store = PostgresStore(UNREACHABLE)
    try:
        with pytest.raises(BoardUnavailable, match="127.0.0.1:1/nowhere") as raised:
            store.board("main")
        assert "secret" not in str(raised.value)
        assert store.wait_for_change(0) is False  # a look, not a wait, while nobody listens
    finally:
        store.close()


def test_board_slugs_survive_an_outage_once_known(postgres_database: str) -> None:
    store = PostgresStore(postgres_database)
    store.create_board("main").add_task(NewTask(title="waiting"))  # the claim needs the board
    assert store.board_slugs() == ["main"]
    with psycopg.connect(postgres_database, autocommit=True) as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        connection.execute("ALTER TABLE boards RENAME TO boards_away")  # reads now fail
        try:
            assert store.board_slugs() == ["main"]
            with pytest.raises(BoardUnavailable):
                store.board("main").claim("n", 60, "cli-auto")
        finally:
            connection.execute("ALTER TABLE boards_away RENAME TO boards")
    assert store.board("main").claim("n", 60, "cli-auto") is not None
    store.close()


def test_a_follower_of_events_never_skips_one_committed_late(
    postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pods write events; the one that inserted first commits last.

    Event ids come from one sequence, so without ordering the late commit's event
    would carry a smaller id than one the follower has already read past.
    """
    import threading

    from lane_runner.board.model import Event, NewTask
    from lane_runner.board.sql.board import SqlBoard

    slow_pod, fast_pod, follower = (PostgresStore(postgres_database) for _ in range(3))
    try:
        slow_pod.create_board("main")
        for task in ("a", "b"):
            slow_pod.board("main").add_task(NewTask(title=task, id=task))
        seen = [event.id for event in follower.board("main").events()]
        inserted, release = threading.Event(), threading.Event()
        original = SqlBoard._event

        def held_open(
            self: SqlBoard, connection: object, task_id: str, *a: object, **k: object
        ) -> None:
            original(self, connection, task_id, *a, **k)  # type: ignore[arg-type]
            if task_id == "a":
                inserted.set()
                release.wait(10)

        monkeypatch.setattr(SqlBoard, "_event", held_open)
        slow = threading.Thread(target=lambda: slow_pod.board("main").archive("a"))
        slow.start()
        assert inserted.wait(10)
        fast = threading.Thread(target=lambda: fast_pod.board("main").archive("b"))
        fast.start()
        fast.join(0.5)
        followed: list[Event] = []
        reader = threading.Thread(
            target=lambda: followed.extend(follower.board("main").events(after_id=max(seen)))
        )
        reader.start()  # it may wait for the slow pod's event to settle: not past it
        reader.join(0.5)
        release.set()
        for thread in (reader, slow, fast):
            thread.join(10)
        last = max([max(seen), *(event.id for event in followed)])
        followed += follower.board("main").events(after_id=last)
        assert sorted(event.task_id for event in followed if event.kind == "archived") == ["a", "b"]
    finally:
        for store in (slow_pod, fast_pod, follower):
            store.close()


def test_placeholders_with_digits_become_psycopg_s_whole() -> None:
    """``:skip0`` (a claim's workspaces, its passed-over tasks) is one name, not ``:skip``
    and a 0; a cast and a time of day are not names."""
    assert pyformat("id <> :passed0 AND w IN (:skip0, :skip12) AND t = :now::text") == (
        "id <> %(passed0)s AND w IN (%(skip0)s, %(skip12)s) AND t = %(now)s::text"
    )
    assert pyformat("'12:30' LIKE 'a%'") == "'12:30' LIKE 'a%%'"
