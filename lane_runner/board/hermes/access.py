"""One Hermes board's storage: a short connection per operation, and the rows read back.

Hermes connections are bound to the thread that made them, so each operation opens
its own, under ``scoped_current_board`` so Hermes's path functions name the right
board. What every part of ``HermesBoard`` (``board.py``) stands on: the other modules
of this package add its operations to this base.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from lane_runner.board.base import BoardUnavailable
from lane_runner.board.gate import RedactedWrites
from lane_runner.board.hermes import home, rows
from lane_runner.board.model import Run, Task
from lane_runner.errors import NotFound

T = TypeVar("T")

AUTHOR = "lane-runner"


class HermesAccess(RedactedWrites):
    """What every operation of a Hermes board stands on: its connection and its rows."""

    def __init__(
        self, slug: str, path: Path, kb: ModuleType, failure_limit: int, budget: float
    ) -> None:
        self.slug = slug
        self.path = path
        self._kb = kb
        self._failure_limit = failure_limit
        # Hermes waits 120 s on a locked database; a runner waits its budget
        # (board/retry.py), then skips the board and comes back.
        self._busy_timeout_ms = max(1, int(budget * 1000))
        self._schema_checked = False

    # -- storage plumbing ------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if not self.path.is_file():
            # Hermes's connect would create an empty board here; this one is gone.
            raise BoardUnavailable(f"Hermes board {self.slug!r}: {self.path} no longer exists")
        with self._kb.scoped_current_board(self.slug):
            connection = self._kb.connect(db_path=self.path)
            try:
                connection.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                if not self._schema_checked:
                    self._check_schema(connection)
                yield connection
            finally:
                connection.close()

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        missing = home.missing_columns(connection)
        if missing:
            raise BoardUnavailable(
                f"Hermes board {self.slug!r} ({self.path}) lacks {', '.join(missing)}: "
                "it was made by another Hermes release; open it once with "
                f"hermes-agent>=0.19 ('hermes kanban --board {self.slug} list') so Hermes "
                "migrates it"
            )
        self._schema_checked = True

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on a fresh connection; storage trouble becomes ``BoardUnavailable``."""
        try:
            with self._connection() as connection:
                return work(connection)
        except (sqlite3.Error, OSError, self._kb.KanbanDbCorruptError) as error:
            raise BoardUnavailable(
                f"Hermes board {self.slug!r} ({self.path}) is unavailable: {error}; "
                "lane-runner skips it and retries (if it stays unavailable, run "
                f"'hermes kanban --board {self.slug} list': Hermes checks the database and "
                "says whether it is corrupt, keeping a backup beside it)"
            ) from error

    # -- rows --------------------------------------------------------------------

    def _task_row(self, connection: sqlite3.Connection, task_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = connection.execute(
            "SELECT * FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise NotFound(
                f"no task {task_id!r} on Hermes board {self.slug!r}; "
                f"see 'lane-runner task ls --board {self.slug}'"
            )
        return row

    @staticmethod
    def _last_ended(connection: sqlite3.Connection, task_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = connection.execute(
            "SELECT * FROM task_runs WHERE task_id = ? AND ended_at IS NOT NULL "
            "ORDER BY id DESC LIMIT 1",
            (task_id,),
        ).fetchone()
        return row

    def _task(self, connection: sqlite3.Connection, task_id: str) -> Task:
        row = self._task_row(connection, task_id)
        parents = tuple(
            r[0]
            for r in connection.execute(
                "SELECT parent_id FROM task_links WHERE child_id = ? ORDER BY rowid", (task_id,)
            )
        )
        return rows.task(row, self.slug, parents, self._last_ended(connection, task_id))

    def _run(self, connection: sqlite3.Connection, run_id: int) -> Run:
        row = connection.execute(
            "SELECT r.*, (SELECT json_extract(e.payload, '$.lock') FROM task_events e "
            "WHERE e.run_id = r.id AND e.kind = 'claimed' ORDER BY e.id LIMIT 1) AS claimed_lock "
            "FROM task_runs r WHERE r.id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id} on Hermes board {self.slug!r}")
        return rows.run(row, self.slug, row["claimed_lock"])


    def close(self) -> None:
        """Nothing is held open between operations."""
