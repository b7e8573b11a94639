"""What only the SQLite backend promises: its file, schema, locks and broken files."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane_runner.board import open_store
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import NewTask, Status
from lane_runner.board.sqlite import SCHEMA_VERSION, SqliteStore
from lane_runner.config import load
from lane_runner.errors import UsageError


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "boards")
    yield opened
    opened.close()


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False)


def test_file_is_private_wal_with_schema_version(store: SqliteStore, tmp_path: Path) -> None:
    store.create_board("main")
    path = tmp_path / "boards" / "main.db"
    assert path.stat().st_mode & 0o777 == 0o600
    connection = raw(path)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    connection.close()


def test_an_empty_file_is_migrated_on_open(store: SqliteStore, tmp_path: Path) -> None:
    (tmp_path / "boards").mkdir()
    (tmp_path / "boards" / "left-by-a-crash.db").touch()
    assert store.board("left-by-a-crash").list_tasks() == []


def test_a_newer_schema_is_refused(store: SqliteStore, tmp_path: Path) -> None:
    store.create_board("main")
    store.close()
    connection = raw(tmp_path / "boards" / "main.db")
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.close()
    with pytest.raises(BoardUnavailable, match="upgrade lane-runner"):
        SqliteStore(tmp_path / "boards").board("main")


def test_check_constraints_and_append_only_events(store: SqliteStore, tmp_path: Path) -> None:
    store.create_board("main").add_task(NewTask(title="t", id="t"))
    connection = raw(tmp_path / "boards" / "main.db")
    with pytest.raises(sqlite3.IntegrityError):
        connection.execute("UPDATE tasks SET status = 'lost' WHERE id = 't'")
    with pytest.raises(sqlite3.IntegrityError):
        connection.execute("UPDATE tasks SET status = 'running' WHERE id = 't'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        connection.execute("DELETE FROM events")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        connection.execute("UPDATE events SET kind = 'x'")
    connection.close()


def test_foreign_assignees_are_left_alone(store: SqliteStore, tmp_path: Path) -> None:
    """Another tool sharing the board may assign tasks to its own lanes."""
    board = store.create_board("main")
    board.add_task(NewTask(title="theirs", id="theirs", priority=5))
    board.add_task(NewTask(title="ours", id="ours"))
    connection = raw(tmp_path / "boards" / "main.db")
    connection.execute("UPDATE tasks SET assignee = 'human-ana' WHERE id = 'theirs'")
    connection.close()
    claimed = board.claim("n", 60, "cli-auto")
    assert claimed is not None and claimed.task.id == "ours"
    assert board.claim("n", 60, "cli-auto") is None
    assert board.get_task("theirs").status is Status.READY


def test_corrupt_board_is_skipped_and_reported_once(
    store: SqliteStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for slug in ("alpha", "omega"):
        store.create_board(slug).add_task(NewTask(title=slug, id=slug))
    (tmp_path / "boards" / "broken.db").write_bytes(b"this is not a database" * 100)
    fresh = SqliteStore(tmp_path / "boards")
    try:
        with caplog.at_level(logging.ERROR, logger="lane_runner.board.sqlite"):
            working = []
            for _ in range(3):  # three daemon ticks
                for slug in fresh.board_slugs():
                    try:
                        working.append(fresh.board(slug).list_tasks()[0].id)
                    except BoardUnavailable as error:
                        assert "broken" in str(error)
        assert working == ["alpha", "omega"] * 3
        assert len([r for r in caplog.records if "broken" in r.getMessage()]) == 1
        for slug in ("alpha", "omega"):
            claimed = fresh.board(slug).claim("n", 60, "cli-auto")
            assert claimed is not None and claimed.task.id == slug
    finally:
        fresh.close()


def test_board_corrupted_while_open_becomes_unavailable(
    store: SqliteStore, tmp_path: Path
) -> None:
    board = store.create_board("main")
    healthy = store.create_board("other")
    board.add_task(NewTask(title="t"))
    store.close()
    path = tmp_path / "boards" / "main.db"
    for leftover in (path.with_name("main.db-wal"), path.with_name("main.db-shm")):
        leftover.unlink(missing_ok=True)
    path.write_bytes(b"\0garbage" * 1000)
    reopened = SqliteStore(tmp_path / "boards")
    try:
        with pytest.raises(BoardUnavailable, match="main"):
            reopened.board("main")
        healthy = reopened.board("other")
        healthy.add_task(NewTask(title="still fine"))
        assert len(healthy.list_tasks()) == 1
    finally:
        reopened.close()


def remove_board(path: Path) -> None:
    """``rm boards/<slug>.db*``, as an operator would, while the store stays open."""
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        path.with_name(name).unlink(missing_ok=True)


def test_a_board_removed_and_made_again_is_served_from_its_new_file(
    store: SqliteStore, tmp_path: Path
) -> None:
    board = store.create_board("main")
    board.add_task(NewTask(title="in the old file", id="old"))
    store.wait_for_change(0)
    remove_board(tmp_path / "boards" / "main.db")
    other = SqliteStore(tmp_path / "boards")
    try:
        other.create_board("main").add_task(NewTask(title="in the new file", id="new"))
    finally:
        other.close()
    assert store.wait_for_change(0)  # the new file is a change, whatever its count says
    assert [task.id for task in board.list_tasks()] == ["new"]
    claimed = board.claim("n", 60, "cli-auto")
    assert claimed is not None and claimed.task.id == "new"
    reader = raw(tmp_path / "boards" / "main.db")
    assert reader.execute("SELECT status FROM tasks").fetchall() == [("running",)]
    reader.close()


def test_a_removed_board_is_unavailable_and_never_made_again_by_opening_it(
    store: SqliteStore, tmp_path: Path
) -> None:
    board = store.create_board("main")
    board.add_task(NewTask(title="t"))
    path = tmp_path / "boards" / "main.db"
    remove_board(path)
    with pytest.raises(BoardUnavailable, match="main"):
        board.list_tasks()
    with pytest.raises(BoardUnavailable, match="main"):
        board.add_task(NewTask(title="written nowhere"))
    assert not path.exists()
    assert store.board_slugs() == []


def test_busy_board_is_retried_within_the_budget(store: SqliteStore, tmp_path: Path) -> None:
    """A writer holding the lock briefly delays a claim; one that never lets go fails it."""
    board = store.create_board("main")
    board.add_task(NewTask(title="t"))
    impatient = SqliteStore(tmp_path / "boards", wait_budget=1.0)
    holder = raw(tmp_path / "boards" / "main.db")
    try:
        holder.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.1, lambda: holder.execute("COMMIT"))
        release.start()
        assert impatient.board("main").claim("n", 60, "cli-auto") is not None
        release.join()
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(BoardUnavailable, match="locked"):
            impatient.board("main").heartbeat(1, 60)
        holder.execute("ROLLBACK")
    finally:
        impatient.close()
        holder.close()


def test_open_store_follows_config(tmp_path: Path) -> None:
    cfg = load(tmp_path, environ={})
    opened = open_store(cfg)
    try:
        opened.create_board("main")
    finally:
        opened.close()
    assert (tmp_path / "boards" / "main.db").is_file()
    with pytest.raises(UsageError, match="postgresql://"):
        open_store(cfg.replace(board_url="mysql://localhost/lanes"))
