"""One PostgreSQL board's view of the database: the dialect ``SqlBoard`` runs its
transactions through (placeholders, the board's gate, run ids, the server's clock).
"""

from __future__ import annotations

from collections.abc import Callable

from lane_runner.board.postgres.database import SERVER_CLOCK, Database, database_now
from lane_runner.board.sql.dialect import BoardLock, pyformat
from lane_runner.board.sql.dialect import Connection as AnyConnection
from lane_runner.errors import NotFound

Clock = Callable[[], float]


class PostgresBoardDialect:
    """One board's view of the database: the dialect ``SqlBoard`` runs its transactions through."""

    insertion_order = "seq"

    def __init__(self, slug: str, database: Database, clock: Clock | None) -> None:
        self.scope = slug
        self.transaction = database.transaction
        self._call = database.call
        self._clock = clock

    def sql(self, statement: str) -> str:
        return pyformat(statement)

    def lock_board(self, connection: AnyConnection, *, new_run: bool = False) -> BoardLock:
        """The board's gate, exclusive (``board/postgres/transitions.py``), and the server's clock
        read once it is granted; with ``new_run``, the next run id from the sequence."""
        board = connection.execute(
            "SELECT * FROM lane_runner_lock_board(%s, false, %s)", (self.scope, new_run)
        ).fetchone()
        if board["locked_at"] is None:
            raise NotFound(f"board {self.scope!r} no longer exists")
        now = float(board["locked_at"]) if self._clock is None else self._clock()
        return BoardLock(now, int(board["run_id"]) if new_run else None)

    def settled_events(self) -> int:
        """The board's last event id once no event of it is in flight: every event at or
        below it has committed, whatever order the claims and completions committed in."""
        row = self._call(
            "SELECT lane_runner_settled_events(%(board)s, %(lock_timeout)s) AS last",
            {"board": self.scope},
        )
        assert row is not None  # the function returns one value
        return int(row["last"])

    def lock_rows(self, *, skip_locked: bool = False) -> str:
        """``FOR NO KEY UPDATE``: it keeps out other transitions of the task, not the rows
        (events, runs, comments) that only refer to it."""
        return " FOR NO KEY UPDATE SKIP LOCKED" if skip_locked else " FOR NO KEY UPDATE"

    def setting(self, key: str) -> str:
        return f"(settings::jsonb ->> '{key}')"

    def clock(self) -> tuple[str, float | None]:
        """The server's clock, read by the statement itself: no round trip of its own."""
        if self._clock is not None:
            return ":now", self._clock()
        return SERVER_CLOCK, None

    def now(self, connection: AnyConnection) -> float:
        """The server's clock at this statement (after the board lock was granted)."""
        if self._clock is not None:
            return self._clock()
        return database_now(connection)

    def close(self) -> None:
        """Nothing to release: connections belong to the store's pool."""


