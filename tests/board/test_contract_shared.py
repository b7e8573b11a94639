"""The board contract, continued (docs/ARCHITECTURE.md §5): what one runner of a board
sees of the others, its changes and its usage ledger. Every backend runs it through
``store`` (``tests/board/conftest.py``), as ``test_contract.py``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lane_runner.board.base import Board, HostedBoard, SharedLedger, Store
from lane_runner.board.model import NewTask
from tests.board.hermes_backend import READ_ONLY_BOARDS, not_on_hermes

# -- change notification -----------------------------------------------------------


def test_wait_for_change_sees_other_runners(open_store: Callable[[], Store]) -> None:
    watcher = open_store()
    board = watcher.create_board("main")
    assert watcher.wait_for_change(0.0)  # its own create
    assert not watcher.wait_for_change(0.05)
    other = open_store().board("main")
    writer = threading.Timer(0.1, lambda: other.add_task(NewTask(title="t")))
    writer.start()
    try:
        assert watcher.wait_for_change(30)
    finally:
        writer.join()
    assert len(board.list_tasks()) == 1


def test_wait_for_change_sees_new_boards(open_store: Callable[[], Store]) -> None:
    watcher = open_store()
    watcher.create_board("main")
    watcher.wait_for_change(0.0)
    open_store().create_board("second")
    assert watcher.wait_for_change(30)


# -- the shared usage ledger (SharedLedger) ------------------------------------------


def spend(record_id: str, task_id: str, day: str, at: float, cost: float) -> dict[str, Any]:
    """A usage record as the home ledger writes it (``usage/ledger.py``), as far as the
    board reads it."""
    return {"format": 1, "id": record_id, "task_id": task_id, "day": day, "at": at,
            "board": "main", "tokens": {"input": 10}, "cost_usd": cost}


def test_usage_is_kept_once_per_id_for_every_runner_of_the_board(
    board: Board, open_store: Callable[[], Store]
) -> None:
    """Two runners send overlapping records: each is stored once, as first sent, and both
    read every one, by task and from a day on. Hermes has no shared ledger (its database
    is Hermes's): it says so by not being a SharedLedger."""
    if isinstance(board, HostedBoard):
        assert not isinstance(board, SharedLedger)
        return
    other = open_store().board("main")
    assert isinstance(board, SharedLedger) and isinstance(other, SharedLedger)
    assert board.usage() == []
    assert board.record_usage([spend("a", "t1", "2026-12-01", 1.0, 0.5),
                               spend("b", "t1", "2026-12-02", 2.0, 0.25)]) == 2
    assert other.record_usage([spend("b", "t1", "2026-12-02", 2.0, 99.0),
                               spend("c", "t2", "2026-12-02", 3.0, 0.125)]) == 1
    assert other.record_usage([]) == 0
    for reader in (board, other):
        assert [(r["id"], r["cost_usd"]) for r in reader.usage()] == [
            ("a", 0.5), ("b", 0.25), ("c", 0.125)]
        assert [r["id"] for r in reader.usage(task_id="t1")] == ["a", "b"]
        assert [r["id"] for r in reader.usage(since_day="2026-12-02")] == ["b", "c"]
        assert [r["id"] for r in reader.usage(task_id="t1", since_day="2026-12-02")] == ["b"]
    assert board.usage()[0] == spend("a", "t1", "2026-12-01", 1.0, 0.5)  # stored whole


@not_on_hermes(READ_ONLY_BOARDS)
def test_usage_outlives_its_task_and_goes_with_its_board(store: Store) -> None:
    board = store.create_board("spent")
    assert isinstance(board, SharedLedger)
    board.add_task(NewTask(title="t", id="t"))
    board.record_usage([spend("a", "t", "2026-12-01", 1.0, 0.5)])
    board.delete("t", force=True)
    assert [r["id"] for r in board.usage()] == ["a"]  # what a deleted task spent was spent
    store.delete_board("spent")
    again = store.create_board("spent")
    assert isinstance(again, SharedLedger) and again.usage() == []
