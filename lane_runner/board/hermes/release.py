"""A run ended without a result on a Hermes board: blocked, or its task back to ready.

Upstream's ``reclaim_task`` takes no run id, so ``reclaim`` is written here in one of
Hermes's own write transactions, guarded on the task's current run, with Hermes's own
run and event writers.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from lane_runner.board import rules
from lane_runner.board.hermes import rows, transaction
from lane_runner.board.hermes.access import AUTHOR, HermesAccess
from lane_runner.board.model import BlockKind, Outcome


class HermesRelease(HermesAccess):
    """``block`` and ``reclaim``, each guarded on the task's current run."""

    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool:
        kind = BlockKind(kind)

        def work(connection: sqlite3.Connection) -> bool:
            task_id = self._current_task(connection, run_id)
            if task_id is None:
                return False
            with transaction.one_transaction(self._kb, connection) as nested:
                blocked = bool(
                    self._kb.block_task(
                        nested,
                        task_id,
                        reason=reason,
                        kind=rows.HERMES_KINDS[kind],
                        expected_run_id=run_id,
                    )
                )
                if blocked and count_failure:
                    nested.execute(
                        "UPDATE tasks SET consecutive_failures = consecutive_failures + 1, "
                        "last_failure_error = ? WHERE id = ?",
                        (reason[:500], task_id),
                    )
            return blocked

        return self._call(work)

    @staticmethod
    def _current_task(connection: sqlite3.Connection, run_id: int) -> str | None:
        row = connection.execute(
            "SELECT id FROM tasks WHERE current_run_id = ? AND status = 'running'", (run_id,)
        ).fetchone()
        return None if row is None else str(row["id"])

    @staticmethod
    def _reviews(connection: sqlite3.Connection, run_id: int) -> bool:
        """Whether run ``run_id`` is a review (Hermes's ``claim_review_task`` records the
        status it claimed from on the claim event)."""
        row = connection.execute(
            "SELECT 1 FROM task_events WHERE run_id = ? AND kind = 'claimed' AND "
            "json_valid(payload) AND json_extract(payload, '$.source_status') = 'review'",
            (run_id,),
        ).fetchone()
        return row is not None

    def reclaim(
        self,
        run_id: int,
        reason: str,
        outcome: Outcome,
        *,
        count_failure: bool = False,
        cooldown: float | None = None,
    ) -> bool:
        """Running with this run → ready (or blocked past the failure limit; a review run's
        task back to review), in one transaction.

        Upstream's ``reclaim_task`` releases whatever claim the task holds when it
        runs, so it could end a newer run than the one meant. This is the same
        transition in Hermes's write transaction, guarded on the current run id.
        """
        outcome = rules.check_reclaim_outcome(Outcome(outcome))

        def work(connection: sqlite3.Connection) -> bool:
            with self._kb.write_txn(connection):
                task = connection.execute(
                    "SELECT id, consecutive_failures, max_retries FROM tasks "
                    "WHERE current_run_id = ? AND status = 'running'",
                    (run_id,),
                ).fetchone()
                if task is None:
                    return False
                return self._release(
                    connection, task, run_id, reason, outcome, count_failure, cooldown
                )

        return self._call(work)

    def _release(
        self,
        connection: sqlite3.Connection,
        task: sqlite3.Row,
        run_id: int,
        reason: str,
        outcome: Outcome,
        count_failure: bool,
        cooldown: float | None,
    ) -> bool:
        task_id = task["id"]
        # A review run handed back leaves its task in review for the next reviewer: the
        # implementer's result is not undone by a reviewer that died (reviews.py).
        review = self._reviews(connection, run_id)
        count_failure = count_failure and not review
        failures = int(task["consecutive_failures"] or 0) + count_failure
        limit = task["max_retries"] if task["max_retries"] is not None else self._failure_limit
        gave_up = count_failure and rules.gives_up(failures, int(limit))
        error = f"gave up after {failures} failures; last: {reason}" if gave_up else reason
        ours: dict[str, Any] = {"outcome": outcome.value, "reason": reason}
        if cooldown is not None:
            ours["next_attempt_at"] = time.time() + cooldown
        connection.execute(
            "UPDATE tasks SET status = ?, claim_lock = NULL, claim_expires = NULL, "
            "worker_pid = NULL, block_kind = NULL, consecutive_failures = ?, "
            "last_failure_error = CASE WHEN ? THEN ? ELSE last_failure_error END "
            "WHERE id = ? AND current_run_id = ? AND status = 'running'",
            (
                "review" if review else "blocked" if gave_up else "ready",
                failures,
                count_failure,
                error[:500],
                task_id,
                run_id,
            ),
        )
        hermes_outcome = rows.HERMES_OUTCOMES[outcome]
        self._kb._end_run(
            connection,
            task_id,
            outcome=hermes_outcome,
            status=hermes_outcome,
            error=error,
            metadata={rows.MARK: ours},
        )
        payload: dict[str, Any] = {"reason": reason, "outcome": outcome.value, "by": AUTHOR}
        if gave_up:
            payload["failures"] = failures
            # A "blocked" event is what Hermes's recompute_ready honours as a block only
            # 'hermes kanban unblock' lifts; without it Hermes would put the task back
            # to ready whenever it has fewer failures than Hermes's own limit.
            sticky = {"reason": error[:500], "kind": None, "by": AUTHOR}
            self._kb._append_event(connection, task_id, "blocked", sticky, run_id=run_id)
        self._kb._append_event(
            connection, task_id, "gave_up" if gave_up else "reclaimed", payload, run_id=run_id
        )
        return True
