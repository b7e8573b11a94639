"""The usage ledger shared through a real board (``usage/share.py``): two homes'
records counted together and once, a board that is away while a record is made gets it
later (once), and retention drops only what the board holds."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.sql.board import SqlBoard
from lane_runner.board.sqlite import SqliteStore
from lane_runner.providers.usage import UsageReport, tokens
from lane_runner.service import recovery
from lane_runner.service.services import build
from lane_runner.usage import share
from lane_runner.usage.ledger import Attempt, Ledger
from lane_runner.usage.record import Record, day_of, from_board, read
from lane_runner.usage.spend import Spend, merged, total
from tests.harness import BOARD, Lane

PRICES = {"gpt-5": {"input": 1.0, "output": 10.0}}
DAY = 86400.0
NOW = 1_800_000_000.0


def spend(book: Ledger, session: str, run: int, at: float = NOW) -> list[Record]:
    spent = tokens(input=1000, output=100).tokens
    report = UsageReport("cumulative", session, {"gpt-5": spent}, {})
    return book.record(Attempt("main", "t1", run, 1, "codex"), report, PRICES, at)


@pytest.fixture
def boards(tmp_path: Path) -> Iterator[tuple[SqliteStore, SqliteStore]]:
    """Two runners' stores on one board directory, the second waiting briefly for a lock."""
    first = SqliteStore(tmp_path / "boards")
    first.create_board("main")
    second = SqliteStore(tmp_path / "boards", wait_budget=0.2)
    yield first, second
    first.close()
    second.close()


def board_of(store: SqliteStore) -> SqlBoard:
    board = store.board("main")
    assert isinstance(board, SqlBoard)
    return board


def test_two_homes_count_their_spend_together_and_once(
    tmp_path: Path, boards: tuple[SqliteStore, SqliteStore]
) -> None:
    homes = Ledger(tmp_path / "a"), Ledger(tmp_path / "b")
    spend(homes[0], "s-a", run=1)
    spend(homes[1], "s-b", run=2)
    for book, store in zip(homes, boards, strict=True):
        assert share.send(board_of(store), book) == 1
        assert share.send(board_of(store), book) == 0  # confirmed: not sent again
    for book, store in zip(homes, boards, strict=True):
        records = Spend.of(share.on_board(board_of(store)), book.records("main")).records
        totals = total(records)
        assert totals.records == 2 and totals.tokens["input"] == 2000
        assert totals.cost_usd == pytest.approx(2 * (1000 * 1.0 + 100 * 10.0) / 1e6)


def test_a_record_made_while_the_board_is_away_is_sent_later_and_counted_once(
    tmp_path: Path, boards: tuple[SqliteStore, SqliteStore]
) -> None:
    board = board_of(boards[1])
    book = Ledger(tmp_path / "home")
    [record] = spend(book, "s", run=1)
    holder = sqlite3.connect(tmp_path / "boards" / "main.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another runner holds the board's write lock
    with pytest.raises(BoardUnavailable):
        share.send(board, book)
    assert [r.id for r in book.unsent("main")] == [record.id]
    counted = total(merged(from_board(board.usage(), "main"), book.records("main")))
    assert counted.records == 1  # the home's copy counts while the board lacks it
    holder.execute("ROLLBACK")
    holder.close()
    again = Ledger(tmp_path / "home")  # a later process: recovery, the next daemon
    assert share.send(board, again) == 1
    assert share.send(board, Ledger(tmp_path / "home")) == 0
    again.sent_path("main").unlink()  # a mark lost to a crash: sent again, stored once
    assert share.send(board, Ledger(tmp_path / "home")) == 1
    assert [r["id"] for r in board.usage()] == [record.id]
    shared = from_board(board.usage(), "main")
    assert total(merged(shared, again.records("main"))).records == 1


def test_retention_drops_old_records_the_board_holds_and_keeps_the_rest(
    tmp_path: Path, boards: tuple[SqliteStore, SqliteStore]
) -> None:
    board = board_of(boards[0])
    book = Ledger(tmp_path / "home")
    [old] = spend(book, "s1", run=1, at=NOW - 100 * DAY)
    [recent] = spend(book, "s2", run=2, at=NOW - DAY)
    assert share.settle(board, book, 0, NOW) == 0  # 0: keep every record
    assert len(book.records("main")) == 2
    assert share.settle(board, book, 90, NOW) == 1  # sent, then the old one went
    [unsent_old] = spend(book, "s3", run=3, at=NOW - 100 * DAY)  # made, never sent
    assert book.prune("main", day_of(NOW - 90 * DAY)) == 0
    reread = Ledger(tmp_path / "home")
    assert [r.id for r in reread.records("main")] == [recent.id, unsent_old.id]
    assert [r.id for r in reread.unsent("main")] == [unsent_old.id]
    assert {r["id"] for r in board.usage()} == {old.id, recent.id}  # the board keeps all


def test_a_daemon_that_records_while_the_board_is_locked_sends_the_record_later(
    lane: Lane,
) -> None:
    """The CLI reports its spend while another process holds the board's write lock: the
    home has the record (fsynced first), the board not yet; once the lock is gone it is
    sent (by the cleanup sweep or, at the latest, by recovery), and the board and
    ``usage`` count it once."""
    lane.write_config(lease_ttl=600.0, prices={"gpt-5.1-codex-mini": {"input": 0.25}})
    gate = lane.root / "gate"
    gate.touch()  # the CLI waits at it (LANE_RUNNER_SIM_GATE) until the board is locked
    lane.extra_env["LANE_RUNNER_SIM_GATE"] = str(gate)
    task = lane.add("spend", body="[sim:blocked] stuck", assignee="cli-codex-low")
    daemon = lane.start()
    lane.wait(lambda: len(lane.live_workers()) == 1, what="the CLI at the gate")
    blocker = sqlite3.connect(lane.home.board_file(BOARD), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # every write to the board is refused now
    try:
        gate.unlink()
        lane.wait(lambda: read(lane.home.usage_file(BOARD)) != [] and
                  not lane.live_workers(), what="the CLI's spend in the home ledger")
        assert lane.board.usage() == []  # the board could not take it
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    lane.wait(lambda: lane.board.get_task(task.id).status.value == "blocked",
              what="the run's end to land once the lock is gone")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    recovered = lane.cli("recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    [record] = read(lane.home.usage_file(BOARD))
    assert [r["id"] for r in lane.board.usage()] == [record.id]  # sent, once
    usage = json.loads(lane.cli("usage", "--json").stdout)
    assert usage["total"]["records"] == 1 and usage["total"]["tokens"]["input"] == 1200


def test_recovery_goes_on_when_the_marks_cannot_be_written(
    lane: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The board takes the home's records but the disk is full for the ``.sent`` marks:
    recovery still ends, and the next one sends them again, which the board stores once."""
    services = build(config.load(lane.root, {}))
    try:
        spent = tokens(input=1000, output=100).tokens
        report = UsageReport("cumulative", "s1", {"gpt-5": spent}, {})
        [record] = services.ledger.record(
            Attempt(BOARD, "t1", 1, 1, "codex"), report, PRICES, NOW
        )

        def full(*_: object) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        with monkeypatch.context() as patch:
            patch.setattr(Ledger, "_write_all", full)
            assert recovery.recover(services).usage_sent == 0
        assert [r["id"] for r in lane.board.usage()] == [record.id]
        assert recovery.recover(services).usage_sent == 1
        assert [r["id"] for r in lane.board.usage()] == [record.id]  # stored once
    finally:
        services.close()
