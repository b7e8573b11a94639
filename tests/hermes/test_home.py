"""A Hermes home as lane-runner meets it, besides the contract (``test_board.py``): a
path that is not a home, a corrupt or locked board, and wake-ups on Hermes's writes."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lane_runner.board.base import BoardUnavailable
from lane_runner.board.hermes.store import HermesStore
from lane_runner.errors import UsageError
from tests.hermes.conftest import HermesHome
from tests.hermes.test_board import NODE, add, board

# -- bad input ---------------------------------------------------------------------


def test_a_path_that_is_not_a_hermes_home_is_refused_and_left_alone(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory.*hermes kanban init"):
        HermesStore(f"hermes://{tmp_path}/absent")
    with pytest.raises(UsageError, match="not a Hermes home .no kanban.db"):
        HermesStore(f"hermes://{tmp_path}")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match="three slashes"):
        HermesStore("hermes://relative/path")


def test_a_corrupt_board_is_skipped_and_kept(
    hermes_home: HermesHome, hermes_store: HermesStore
) -> None:
    hermes_home.hermes("boards", "create", "broken")
    add(hermes_store, "fine", assignee="cli-auto")
    database = hermes_home.path / "kanban" / "boards" / "broken" / "kanban.db"
    database.write_bytes(b"this is not a database" * 100)
    with pytest.raises(BoardUnavailable, match="'broken'.*unavailable"):
        hermes_store.board("broken").claim(NODE, 60, "")
    assert database.read_bytes() == b"this is not a database" * 100
    assert board(hermes_store).claim(NODE, 60, "") is not None


def test_a_locked_board_is_unavailable_not_waited_on_for_minutes(
    hermes_store: HermesStore,
) -> None:
    add(hermes_store, "t", assignee="cli-auto")
    holder = sqlite3.connect(board(hermes_store).path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(BoardUnavailable, match="locked"):
            board(hermes_store).claim(NODE, 60, "")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert board(hermes_store).claim(NODE, 60, "") is not None


# -- wake-ups ----------------------------------------------------------------------


def test_wait_for_change_wakes_on_a_hermes_cli_write_and_a_new_board(
    hermes_home: HermesHome, hermes_store: HermesStore
) -> None:
    assert not hermes_store.wait_for_change(0)
    writer = threading.Thread(target=lambda: hermes_home.create("t", "--assignee", "cli-auto"))
    writer.start()
    assert hermes_store.wait_for_change(60)
    writer.join()
    while hermes_store.wait_for_change(0.3):
        pass  # the rest of the CLI's writes
    hermes_home.hermes("boards", "create", "second")
    assert hermes_store.wait_for_change(60)
    assert "second" in hermes_store.board_slugs()


def test_a_wake_up_comes_once_the_commit_is_visible(hermes_store: HermesStore) -> None:
    """SQLite writes the WAL, fsyncs it, then publishes the commit: waking at the first
    write would find nothing to claim and leave the task to the one-second sweep."""
    b = board(hermes_store)
    for n in range(5):
        while hermes_store.wait_for_change(0.2):
            pass
        seen: dict[str, Any] = {}

        def waiter(seen: dict[str, Any] = seen) -> None:
            seen["woke"] = hermes_store.wait_for_change(60)
            seen["claim"] = b.claim(NODE, 60, "")

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)  # the waiter is blocked in the watch by now (or sees the commit at once)
        add(hermes_store, f"t{n}", assignee="cli-auto")
        thread.join()
        assert seen["woke"] and seen["claim"] is not None, n
