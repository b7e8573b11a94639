"""A run ended without a result on an SQL board: its task blocked, or back to ready
(blocked once it gives up), each guarded on the task's current run.
"""

from __future__ import annotations

from lane_runner.board import rules
from lane_runner.board.model import BlockKind, EventKind, Outcome
from lane_runner.board.sql.access import SqlAccess, if_changed
from lane_runner.board.sql.dialect import Connection


class SqlRelease(SqlAccess):
    """``block`` and ``reclaim``."""

    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool:
        kind = BlockKind(kind)

        def work(connection: Connection) -> bool:
            task = self._current(connection, run_id)
            if task is None:
                return False
            now = self._lock(connection).now
            self._end_run(connection, run_id, Outcome.BLOCKED, reason, now)
            failures = task["failure_count"] + count_failure
            self._set_blocked(connection, task["id"], reason, kind, failures, now)
            self._event(
                connection, task["id"], EventKind.BLOCKED, now, run_id,
                reason=reason, block_kind=kind.value,
            )
            return True

        return self._transition(work, notify=if_changed)

    def _set_blocked(
        self,
        connection: Connection,
        task_id: str,
        reason: str,
        kind: BlockKind,
        failure_count: int,
        now: float,
    ) -> None:
        self._q(
            connection,
            "UPDATE tasks SET status = 'blocked', current_run_id = NULL, block_reason = :reason, "
            "block_kind = :kind, failure_count = :failures, next_attempt_at = NULL, "
            "updated_at = :now WHERE board = :board AND id = :id",
            reason=reason, kind=kind.value, failures=failure_count, now=now, id=task_id,
        )

    def reclaim(
        self,
        run_id: int,
        reason: str,
        outcome: Outcome,
        *,
        count_failure: bool = False,
        cooldown: float | None = None,
    ) -> bool:
        outcome = rules.check_reclaim_outcome(Outcome(outcome))

        def work(connection: Connection) -> bool:
            task = self._current(connection, run_id)
            if task is None:
                return False
            now = self._lock(connection).now
            self._end_run(connection, run_id, outcome, reason, now)
            failures = task["failure_count"] + count_failure
            limit = rules.failure_limit_of(task["max_retries"], self._failure_limit)
            if count_failure and rules.gives_up(failures, limit):
                because = f"gave up after {failures} failures; last: {reason}"
                self._set_blocked(connection, task["id"], because, BlockKind.GAVE_UP, failures, now)
                self._event(
                    connection, task["id"], EventKind.GAVE_UP, now, run_id,
                    reason=reason, outcome=outcome.value, failures=failures,
                )
                return True
            self._q(
                connection,
                "UPDATE tasks SET status = 'ready', current_run_id = NULL, "
                "failure_count = :failures, next_attempt_at = :retry_at, updated_at = :now "
                "WHERE board = :board AND id = :id",
                failures=failures, retry_at=None if cooldown is None else now + cooldown,
                now=now, id=task["id"],
            )
            self._event(
                connection, task["id"], EventKind.RECLAIMED, now, run_id,
                reason=reason, outcome=outcome.value, cooldown=cooldown,
            )
            return True

        return self._transition(work, notify=if_changed)
