"""The usage ledger shared through the board, so every runner of a board counts every
runner's spend (docs/ARCHITECTURE.md §3.7).

The home's ledger (``usage/ledger.py``) stays the first durable write: a record is
fsynced there the moment the CLI reports. Copies then go to the board's ledger
(``board/base.py`` ``SharedLedger``) when a run starts, at each heartbeat (its own
thread: the CLI's pipe never waits on the board), before a run ends, in recovery and
in the daemon's cleanup sweep. A board that is away leaves them unsent (the home's
``.sent`` marks say which) until the next of those; the id makes a re-send harmless.
Budgets and reports read the board's copy merged with the home's (``usage/spend.py``),
so a record this runner has not sent yet still counts. A board without a shared
ledger (Hermes) is counted from the home alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lane_runner.board.base import Board, SharedLedger
from lane_runner.usage.ledger import Ledger
from lane_runner.usage.record import Record, day_of, from_board
from lane_runner.usage.spend import Spend, Totals

DAY = 86400.0


def send(board: Board, book: Ledger) -> int:
    """Send the home's records of ``board`` that the board has not confirmed; how many.

    Raises BoardUnavailable with nothing marked (they are sent again next time, which
    the board ignores for any it took before the answer was lost)."""
    if not isinstance(board, SharedLedger):
        return 0
    pending = book.unsent(board.slug)
    if pending:
        board.record_usage([record.to_dict() for record in pending])
        book.mark_sent(board.slug, [record.id for record in pending])
    return len(pending)


def on_board(
    board: Board, *, task_id: str | None = None, since_day: str | None = None
) -> list[Record]:
    """The board's copy of the ledger (of one task, from one UTC day on); none on a
    board without a shared ledger. Raises BoardUnavailable."""
    if not isinstance(board, SharedLedger):
        return []
    return from_board(board.usage(task_id=task_id, since_day=since_day), board.slug)


def task_usage(board: Board, at_home: Iterable[Record], task_id: str) -> dict[str, Any]:
    """What a task spent on every runner of its board (``Spend.task_usage``: in all, per
    run, model and role): the board's copy of its records with this home's. Raises
    BoardUnavailable."""
    return Spend.of(on_board(board, task_id=task_id), at_home).task_usage(task_id)


def spent_today(board: Board | None, at_home: Iterable[Record], now: float) -> Totals:
    """What a board spent on the UTC day of ``now``, on every runner of it: the board's
    copy of the day's records with this home's (``at_home``); this home's alone for
    None (a board that cannot be read now). Raises BoardUnavailable."""
    shared = [] if board is None else on_board(board, since_day=day_of(now))
    return Spend.of(shared, at_home).on_day(now)


def settle(board: Board, book: Ledger, retention_days: float, now: float) -> int:
    """The sweep's part: send what is unsent, then drop the home's records older than
    ``retention_days`` that the board holds (0: keep every record). How many went."""
    send(board, book)
    if retention_days <= 0:
        return 0
    return book.prune(board.slug, day_of(now - retention_days * DAY))
