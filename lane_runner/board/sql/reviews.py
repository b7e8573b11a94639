"""A reviewer's run of its own on an SQL board (issue 41, ``ReviewRuns``): begun beside
the implementer's run while that run is its task's, with a lease of its own, ended with
its verdict or by whatever ends the run it reviews (``SqlAccess._end_run``).

The task stays the implementer's run's: a review run is never the task's current run,
so the exact-run guards of completion, block and reclaim never take it; the usage its
reviewer spends is recorded under its own run id with the role ``review``.
"""

from __future__ import annotations

from lane_runner.board import rules
from lane_runner.board.model import REVIEW_ROLE, Outcome, Run
from lane_runner.board.rows import run_from_row
from lane_runner.board.sql.access import SqlAccess
from lane_runner.board.sql.dialect import Connection

#: Why recovery ended a review run its runner left open.
LEFT_OPEN = "its runner ended before the review did"


class SqlReviewRuns(SqlAccess):
    """``start_review_run``, ``end_review_run`` and ``end_leftover_review_runs``."""

    def start_review_run(self, for_run: int, node: str, lease_ttl: float) -> Run | None:
        rules.require_lease_ttl(lease_ttl)

        def work(connection: Connection) -> Run | None:
            task = self._current(connection, for_run)
            if task is None:
                return None
            now, run_id = self._lock(connection, new_run=True)
            row = self._q(
                connection,
                "INSERT INTO runs (board, id, task_id, node, claimed_at, lease_expires_at, "
                "heartbeat_at, role, for_run) VALUES (:board, :id, :task, :node, :now, "
                ":expires, :now, :role, :for_run) RETURNING *",
                id=run_id, task=task["id"], node=node, now=now, expires=now + lease_ttl,
                role=REVIEW_ROLE, for_run=for_run,
            ).fetchone()
            return run_from_row(row, self.slug)

        return self._transition(work, notify=lambda _: False)  # no task changed

    def end_review_run(self, run_id: int, outcome: Outcome, reason: str) -> bool:
        def work(connection: Connection) -> bool:
            now = self._dialect.now(connection)
            cursor = self._q(
                connection,
                "UPDATE runs SET ended_at = :now, outcome = :outcome, reason = :reason "
                "WHERE board = :board AND id = :id AND role = :role AND ended_at IS NULL",
                now=now, outcome=Outcome(outcome).value, reason=reason, id=run_id,
                role=REVIEW_ROLE,
            )
            return cursor.rowcount == 1

        return self._write(work)

    def end_leftover_review_runs(self, node: str) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            now = self._dialect.now(connection)
            rows = self._q(
                connection,
                "UPDATE runs SET ended_at = :now, outcome = :outcome, reason = :reason "
                "WHERE board = :board AND node = :node AND role = :role "
                "AND ended_at IS NULL RETURNING *",
                now=now, outcome=Outcome.RECLAIMED.value, reason=LEFT_OPEN, node=node,
                role=REVIEW_ROLE,
            ).fetchall()
            return sorted((run_from_row(row, self.slug) for row in rows), key=lambda r: r.id)

        return self._write(work)
