"""The operator controls of an SQL board: a stop asked for a run, and a board's pause.
"""

from __future__ import annotations

from lane_runner.board import rules
from lane_runner.board.model import BoardPause, EventKind, Run, Status, StopRequest
from lane_runner.board.rows import run_from_row, stop_from_row
from lane_runner.board.sql.access import SqlAccess, if_changed
from lane_runner.board.sql.dialect import Connection
from lane_runner.errors import UsageError


class SqlControls(SqlAccess):
    """``request_stop`` (read at heartbeats with ``stop_request``), ``pause`` and ``resume``."""

    def request_stop(self, task_id: str, reason: str, *, requeue: bool) -> Run:
        """Ask the runner of the task's current run to end it (docs/ARCHITECTURE.md §5).

        Only recorded here: the owning runner sees it at its next heartbeat, kills the
        process tree and ends the run with ``reason`` (blocked, or ready with
        ``requeue``), never as a counted failure. A newer request replaces an older one.
        """
        rules.check_text("stop reason", reason)

        def work(connection: Connection) -> Run:
            task = self._task(connection, task_id, lock=True)
            if task.status is not Status.RUNNING or task.current_run_id is None:
                raise UsageError(f"task {task_id!r} is {task.status}, not running: nothing to stop")
            now = self._lock(connection).now
            run = self._q(
                connection,
                "UPDATE runs SET stop_requested_at = :now, stop_reason = :reason, "
                "stop_requeue = :requeue WHERE board = :board AND id = :id RETURNING *",
                now=now, reason=reason, requeue=int(requeue), id=task.current_run_id,
            ).fetchone()
            self._event(
                connection, task_id, EventKind.STOP_REQUESTED, now, task.current_run_id,
                reason=reason, requeue=requeue,
            )
            return run_from_row(run, self.slug)

        return self._transition(work)

    def stop_request(self, run_id: int) -> StopRequest | None:
        """The stop asked for ``run_id`` while it is still running, if any (read at heartbeats)."""

        def work(connection: Connection) -> StopRequest | None:
            row = self._q(
                connection,
                "SELECT * FROM runs WHERE board = :board AND id = :id AND ended_at IS NULL",
                id=run_id,
            ).fetchone()
            return None if row is None else stop_from_row(row)

        return self._read(work)

    def _pause(self, connection: Connection) -> BoardPause | None:
        row = self._q(connection, "SELECT * FROM board_pauses WHERE board = :board").fetchone()
        return None if row is None else BoardPause(row["reason"], row["at"], row["paused_by"])

    def pause(self, reason: str, by: str) -> BoardPause:
        """No runner claims from this board until ``resume``; running work goes on."""
        rules.check_text("pause reason", reason)

        def work(connection: Connection) -> BoardPause:
            now = self._lock(connection).now
            self._q(connection, "DELETE FROM board_pauses WHERE board = :board")
            self._q(
                connection,
                "INSERT INTO board_pauses (board, reason, at, paused_by) "
                "VALUES (:board, :reason, :now, :by)",
                reason=reason, now=now, by=by,
            )
            return BoardPause(reason, now, by)

        return self._transition(work)

    def resume(self) -> bool:
        """True when a pause was lifted; the runners are told, and claim at once."""

        def work(connection: Connection) -> bool:
            self._lock(connection)
            cursor = self._q(connection, "DELETE FROM board_pauses WHERE board = :board")
            return cursor.rowcount > 0

        return self._transition(work, notify=if_changed)

    def paused(self) -> BoardPause | None:
        return self._read(self._pause)
