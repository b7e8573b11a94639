"""The approval gate on an SQL board (``board/base.py`` ``approve`` and ``deny``,
docs/approvals.md): a person's word on a task as it stands, recorded as an event with
who and why, and the second factor's codes used up, each once per board.
"""

from __future__ import annotations

from lane_runner.board.model import BlockKind, Decision, EventKind, Status, Task
from lane_runner.board.sql.access import SqlAccess
from lane_runner.board.sql.dialect import Connection
from lane_runner.errors import UsageError


class SqlApprovals(SqlAccess):
    """``approve`` and ``deny``: each takes the task's row lock, then the board's."""

    def approve(
        self, task_id: str, by: str, note: str = "", code_step: int | None = None
    ) -> Task:
        def work(connection: Connection) -> Task:
            task = self._task(connection, task_id, lock=True)
            if task.status is Status.ARCHIVED:
                raise UsageError(f"task {task_id!r} is archived: there is nothing to approve")
            now = self._lock(connection).now
            if code_step is not None:
                self._use_code(connection, code_step, by, now)
            self._decide(connection, task_id, Decision.APPROVED, by, now)
            self._event(
                connection, task_id, EventKind.APPROVED, now, by=by, note=note,
                second_factor=code_step is not None,
            )
            return self._task(connection, task_id)

        return self._transition(work)

    def deny(self, task_id: str, by: str, reason: str) -> Task:
        def work(connection: Connection) -> Task:
            task = self._task(connection, task_id, lock=True)
            if task.status in (Status.RUNNING, Status.ARCHIVED):
                how = (f"stop it first ('lane-runner task stop {task_id}')"
                       if task.status is Status.RUNNING else "there is nothing to deny")
                raise UsageError(f"task {task_id!r} is {task.status}: {how}")
            now = self._lock(connection).now
            self._decide(connection, task_id, Decision.DENIED, by, now)
            if task.status in (Status.READY, Status.TODO):
                self._q(
                    connection,
                    "UPDATE tasks SET status = 'blocked', block_reason = :reason, "
                    "block_kind = :kind, next_attempt_at = NULL WHERE board = :board AND id = :id",
                    reason=f"denied by {by}: {reason}", kind=BlockKind.DENIED.value,
                    id=task_id,
                )
            self._event(connection, task_id, EventKind.DENIED, now, by=by, reason=reason)
            return self._task(connection, task_id)

        return self._transition(work)

    def _decide(
        self, connection: Connection, task_id: str, decision: Decision, by: str, now: float
    ) -> None:
        self._q(
            connection,
            "UPDATE tasks SET decision = :decision, decided_by = :by, decided_at = :now, "
            "updated_at = :now WHERE board = :board AND id = :id",
            decision=decision.value, by=by, now=now, id=task_id,
        )

    def _use_code(self, connection: Connection, step: int, by: str, now: float) -> None:
        """The code of time step ``step`` used up; UsageError when it was used before."""
        used = self._q(
            connection,
            "INSERT INTO approval_codes (board, step, at, used_by) "
            "VALUES (:board, :step, :now, :by) ON CONFLICT (board, step) DO NOTHING",
            step=step, now=now, by=by,
        ).rowcount
        if used != 1:
            raise UsageError(
                "that code was used already (each code approves once): wait for the next "
                "code and run the command again"
            )
