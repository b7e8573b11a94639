"""Completing a run on an SQL board, exactly once (``rules.completion`` decides), and
the children waiting only on it made ready.
"""

from __future__ import annotations

from typing import Any

from lane_runner.board import rules
from lane_runner.board.model import CompleteOutcome, EventKind, Outcome, Status
from lane_runner.board.rows import Row, task_from_row
from lane_runner.board.sql.access import SqlAccess
from lane_runner.board.sql.dialect import Connection


class SqlCompletion(SqlAccess):
    """``complete``: the run's task row-locked, the outcome decided, then written under
    the board lock."""

    def complete(
        self,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        metadata: dict[str, Any] | None = None,
    ) -> CompleteOutcome:
        def work(connection: Connection) -> CompleteOutcome:
            # The run's task, row-locked; then its latest ended run, read by a statement
            # begun once the row lock is held, so it sees every transition of this task
            # (they all hold its row lock). No other task's state is read yet.
            row: Row | None = self._q(
                connection,
                "SELECT * FROM tasks WHERE board = :board AND id = ("
                "SELECT task_id FROM runs WHERE board = :board AND id = :run)"
                + self._dialect.lock_rows(),
                run=run_id,
            ).fetchone()
            if row is None:
                return CompleteOutcome.STALE  # no such run
            latest_ended: int | None = self._q(
                connection,
                "SELECT MAX(id) AS id FROM runs WHERE board = :board AND task_id = :task "
                "AND ended_at IS NOT NULL AND role = 'implement'",  # a review run never completes
                task=row["id"],
            ).fetchone()["id"]
            task = task_from_row(row, self.slug, ())
            outcome = rules.completion(
                run_id,
                status=task.status,
                current_run_id=task.current_run_id,
                completed_run_id=task.completed_run_id,
                latest_ended_run_id=latest_ended,
                result_matches=rules.same_result(task.result, result),
            )
            if outcome in (CompleteOutcome.COMPLETED, CompleteOutcome.REPLAYED):
                self._record_completion(
                    connection, task.id, run_id, result, summary, outcome, metadata or {}
                )
            return outcome

        return self._transition(
            work,
            notify=lambda outcome: outcome in (CompleteOutcome.COMPLETED, CompleteOutcome.REPLAYED),
        )

    def _record_completion(
        self,
        connection: Connection,
        task_id: str,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        outcome: CompleteOutcome,
        metadata: dict[str, Any],
    ) -> None:
        """The completion's writes, under the board lock (taken here): an event follows,
        and promoting the children reads their other parents."""
        now = self._lock(connection).now
        if outcome is CompleteOutcome.COMPLETED:
            self._end_run(connection, run_id, Outcome.COMPLETED, None, now)
            kind = EventKind.COMPLETED
        else:
            self._q(
                connection,
                "UPDATE runs SET outcome = 'completed' WHERE board = :board AND id = :id",
                id=run_id,
            )
            kind = EventKind.REPLAYED
        self._q(
            connection,
            "UPDATE tasks SET status = 'done', current_run_id = NULL, completed_run_id = :run, "
            "summary = :summary, result = :result, failure_count = 0, next_attempt_at = NULL, "
            "block_reason = NULL, block_kind = NULL, updated_at = :now "
            "WHERE board = :board AND id = :id",
            run=run_id, summary=summary, result=rules.canonical_json(result).decode("utf-8"),
            now=now, id=task_id,
        )
        extra = {"metadata": rules.storable(metadata)} if metadata else {}
        self._event(connection, task_id, kind, now, run_id, **extra)
        self._promote_children(connection, task_id, now)

    def _promote_children(self, connection: Connection, parent: str, now: float) -> None:
        """Children waiting only on ``parent`` become ready, in task id order.

        Under the board lock: a sibling parent completing at the same moment either
        committed before this statement began (its ``done`` is read here) or waits for
        the board lock and then reads this completion's.
        """
        statuses: dict[str, list[Status]] = {}
        for row in self._q(
            connection,
            "SELECT l.task_id AS child, p.status FROM task_links l JOIN tasks p "
            "ON p.board = l.board AND p.id = l.parent_id WHERE l.board = :board "
            "AND l.task_id IN (SELECT t.id FROM tasks t JOIN task_links c ON c.board = t.board "
            "AND c.task_id = t.id WHERE c.board = :board AND c.parent_id = :parent "
            "AND t.status = 'todo') ORDER BY l.task_id",
            parent=parent,
        ):
            statuses.setdefault(row["child"], []).append(Status(row["status"]))
        for child, parents in statuses.items():
            if rules.initial_status(parents) is Status.READY:
                self._q(
                    connection,
                    "UPDATE tasks SET status = 'ready', updated_at = :now "
                    "WHERE board = :board AND id = :id",
                    now=now, id=child,
                )
                self._event(connection, child, EventKind.PROMOTED, now, parent=parent)
