"""What every transaction of an SQL board stands on: its statements, its transactions
and locks (in the order the package's docstring gives), and the rows it reads back.

The other modules of this package add the board contract's operations to this base,
one concern each; ``board.py`` assembles them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson

from lane_runner import suggest
from lane_runner.board.gate import RedactedWrites
from lane_runner.board.model import EventKind, Outcome, Run, Status, Task
from lane_runner.board.rows import Row, run_from_row, task_from_row
from lane_runner.board.sql.dialect import BoardLock, Connection, Cursor, Dialect, Work
from lane_runner.errors import NotFound, UsageError

T = TypeVar("T")


def json_text(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


def if_changed(value: object) -> bool:
    """A transition's notification rule: tell the other runners when it changed something."""
    return bool(value)


def always(_: object) -> bool:
    return True


class SqlAccess(RedactedWrites):
    """One board on an SQL backend: its dialect, its transactions, its rows."""

    def __init__(self, slug: str, dialect: Dialect, failure_limit: int) -> None:
        self.slug = slug
        self._dialect = dialect
        self._failure_limit = failure_limit

    # -- plumbing ----------------------------------------------------------------

    def _q(self, connection: Connection, statement: str, **params: Any) -> Cursor:
        cursor: Cursor = connection.execute(
            self._dialect.sql(statement), {"board": self._dialect.scope, **params}
        )
        return cursor

    def _read(self, work: Work[T]) -> T:
        return self._dialect.transaction(work, write=False)

    def _write(self, work: Work[T]) -> T:
        """A write that changes no task (heartbeat, comment): no board lock, no notification."""
        return self._dialect.transaction(work, write=True)

    def _transition(
        self, work: Work[T], notify: Callable[[T], bool] = always
    ) -> T:
        """A write that may change tasks; ``work`` takes its locks itself, in this order:
        its own tasks' rows (``_task_row(lock=True)``, ``_current``), then the board
        (``_lock``) before it reads another task's state or writes an event."""
        return self._dialect.transaction(work, write=True, notify=notify)

    def _lock(self, connection: Connection, *, new_run: bool = False) -> BoardLock:
        """The board lock, to the commit: the transition's time (and a claim's run id)."""
        return self._dialect.lock_board(connection, new_run=new_run)

    # -- row access --------------------------------------------------------------

    def _parents(self, connection: Connection, task_id: str) -> tuple[str, ...]:
        rows = self._q(
            connection,
            "SELECT parent_id FROM task_links WHERE board = :board AND task_id = :id "
            "ORDER BY position",
            id=task_id,
        )
        return tuple(row["parent_id"] for row in rows)

    def _task_row(self, connection: Connection, task_id: str, *, lock: bool = False) -> Row | None:
        """The task's row; with ``lock``, its row lock held to the commit."""
        row: Row | None = self._q(
            connection,
            "SELECT * FROM tasks WHERE board = :board AND id = :id"
            + (self._dialect.lock_rows() if lock else ""),
            id=task_id,
        ).fetchone()
        return row

    def _task(self, connection: Connection, task_id: str, *, lock: bool = False) -> Task:
        row = self._task_row(connection, task_id, lock=lock)
        if row is None:
            listed = self._q(connection, "SELECT id FROM tasks WHERE board = :board")
            ids = [found["id"] for found in listed]  # for "did you mean"
            raise NotFound(
                f"no task {task_id!r} on board {self.slug!r}{suggest.hint(task_id, ids)}; "
                f"see 'lane-runner task ls --board {self.slug}'"
            )
        return task_from_row(row, self.slug, self._parents(connection, task_id))

    def _run(self, connection: Connection, run_id: int) -> Run:
        row = self._q(
            connection, "SELECT * FROM runs WHERE board = :board AND id = :id", id=run_id
        ).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id} on board {self.slug!r}")
        return run_from_row(row, self.slug)

    def _current(self, connection: Connection, run_id: int) -> Row | None:
        """The task row whose current run is ``run_id`` (still running), row-locked: the
        exact-run guard, re-checked on the latest version once the lock is granted."""
        row: Row | None = self._q(
            connection,
            "SELECT * FROM tasks WHERE board = :board AND current_run_id = :run "
            "AND status = 'running'" + self._dialect.lock_rows(),
            run=run_id,
        ).fetchone()
        return row

    def _parent_statuses(self, connection: Connection, parents: Sequence[str]) -> list[Status]:
        """The parents' statuses; UsageError for a missing or archived one (nothing written).

        Every parent is looked up before any is judged, so the error names the first
        parent that does not exist, whatever the order of the problems.
        """
        rows = [self._task_row(connection, parent) for parent in parents]
        found: list[Row] = []
        for parent, row in zip(parents, rows, strict=True):
            if row is None:
                raise UsageError(
                    f"no parent task {parent!r} on board {self.slug!r}: "
                    "parents must be tasks on the same board"
                )
            found.append(row)
        statuses = [Status(row["status"]) for row in found]
        for parent, status in zip(parents, statuses, strict=True):
            if status is Status.ARCHIVED:
                raise UsageError(
                    f"parent task {parent!r} is archived; a child of it would never run"
                )
        return statuses

    def _event(
        self,
        connection: Connection,
        task_id: str,
        kind: EventKind,
        at: float,
        run_id: int | None = None,
        **data: Any,
    ) -> None:
        self._q(
            connection,
            "INSERT INTO events (board, task_id, kind, run_id, at, data) "
            "VALUES (:board, :task, :kind, :run, :at, :data)",
            task=task_id, kind=kind.value, run=run_id, at=at, data=json_text(data),
        )

    def _end_run(
        self, connection: Connection, run_id: int, outcome: Outcome, reason: str | None, at: float
    ) -> None:
        """The run ended, and any review run of it a crash left open (``ReviewRuns``):
        that one as the run did, or ``reclaimed`` when the run completed (only the task's
        own run completes it: ``undelivered.superseded_by`` reads that)."""
        self._q(
            connection,
            "UPDATE runs SET ended_at = :at, outcome = :outcome, reason = :reason "
            "WHERE board = :board AND id = :id AND ended_at IS NULL",
            at=at, outcome=outcome.value, reason=reason, id=run_id,
        )
        left = Outcome.RECLAIMED if outcome is Outcome.COMPLETED else outcome
        self._q(
            connection,
            "UPDATE runs SET ended_at = :at, outcome = :outcome, reason = :reason "
            "WHERE board = :board AND for_run = :id AND ended_at IS NULL",
            at=at, outcome=left.value, reason=f"run {run_id}, which it reviewed, ended",
            id=run_id,
        )


    def close(self) -> None:
        self._dialect.close()

