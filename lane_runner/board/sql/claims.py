"""Claims and leases on an SQL board: a ready task claimed as a new run, its lease
renewed by heartbeats, and the runs whose lease is open or has run out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from lane_runner.board import rules
from lane_runner.board.model import Approval, Claim, EventKind, Run
from lane_runner.board.rows import run_from_row, task_from_row
from lane_runner.board.sql.access import SqlAccess, if_changed
from lane_runner.board.sql.dialect import Connection


class SqlClaims(SqlAccess):
    """``claim``, ``heartbeat``, and the open runs a node or a rescue looks for."""

    def claim(
        self,
        node: str,
        lease_ttl: float,
        default_assignee: str,
        skip_workspaces: Collection[str] = (),
        default_approval: Approval = Approval.NONE,
    ) -> Claim | None:
        rules.require_lease_ttl(lease_ttl)

        def work(connection: Connection) -> Claim | None:
            # Its row lock, then the board's.
            picked = self._pick(
                connection, default_assignee, sorted(skip_workspaces), Approval(default_approval)
            )
            if picked is None:
                return None
            task_id, assignee = picked
            now, run_id = self._lock(connection, new_run=True)
            # The pause is checked by the insert, a statement begun under the board lock:
            # no claim commits after a pause did. Paused, nothing is written (the run id
            # taken is skipped, which keeps run ids increasing).
            run = self._q(
                connection,
                "INSERT INTO runs (board, id, task_id, node, claimed_at, lease_expires_at, "
                "heartbeat_at) SELECT :board, :id, :task, :node, :now, :expires, :now "
                "WHERE NOT EXISTS (SELECT 1 FROM board_pauses WHERE board = :board) "
                "RETURNING *",
                id=run_id, task=task_id, node=node, now=now, expires=now + lease_ttl,
            ).fetchone()
            if run is None:
                return None
            task = self._q(
                connection,
                "UPDATE tasks SET status = 'running', assignee = :assignee, "
                "current_run_id = :run, updated_at = :now WHERE board = :board AND id = :id "
                "RETURNING *",
                assignee=assignee, run=run_id, now=now, id=task_id,
            ).fetchone()
            self._event(connection, task_id, EventKind.CLAIMED, now, run_id, node=node)
            parents = self._parents(connection, task_id)
            return Claim(task_from_row(task, self.slug, parents), run_from_row(run, self.slug))

        return self._transition(work, notify=if_changed)

    def _pick(
        self,
        connection: Connection,
        default_assignee: str,
        skip_workspaces: Sequence[str],
        default_approval: Approval,
    ) -> tuple[str, str] | None:
        """The first claimable task in priority-then-age order, row-locked, and its assignee.

        Tasks another transaction holds are skipped (one being claimed now), and the
        conditions are checked again on the latest version once the lock is granted
        (PostgreSQL's READ COMMITTED does), so a task claimed meanwhile is passed over.
        Unassigned tasks are left out in SQL when there is no default assignee, and so
        are tasks of ``skip_workspaces`` and those waiting for approval before they run
        (``rules.awaiting_run_approval``); a task whose assignee is not a lane
        (``rules.claim_assignee``; ``add_task`` lets none in) is passed over too.
        """
        clock, now = self._dialect.clock()
        skipped = {f"skip{n}": workspace for n, workspace in enumerate(skip_workspaces)}
        not_skipped = (
            f" AND (workspace IS NULL OR workspace NOT IN ({', '.join(':' + k for k in skipped)}))"
            if skipped
            else ""
        )
        passed: dict[str, str] = {}
        while True:
            not_passed = "".join(f" AND id <> :passed{n}" for n in range(len(passed)))
            row = self._q(
                connection,
                "SELECT id, assignee FROM tasks WHERE board = :board AND status = 'ready' "
                f"AND (next_attempt_at IS NULL OR next_attempt_at <= {clock}) "
                f"AND (assignee IS NOT NULL OR :unassigned){not_skipped}{not_passed} "
                f"AND NOT {rules.awaiting_run_approval(self._dialect.setting('approval'))} "
                f"ORDER BY priority DESC, created_at, {self._dialect.insertion_order} LIMIT 1"
                + self._dialect.lock_rows(skip_locked=True),
                now=now, unassigned=bool(default_assignee), **skipped, **passed,
                default_approval=default_approval.value,
            ).fetchone()
            if row is None:
                return None
            assignee = rules.claim_assignee(row["assignee"], default_assignee)
            if assignee is not None:
                return row["id"], assignee
            passed[f"passed{len(passed)}"] = row["id"]

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        """The run's lease renewed while it is its task's; a review run's while the run it
        reviews is (``ReviewRuns``)."""

        def work(connection: Connection) -> bool:
            now = self._dialect.now(connection)
            cursor = self._q(
                connection,
                "UPDATE runs SET lease_expires_at = :expires, heartbeat_at = :now "
                "WHERE board = :board AND id = :id AND ended_at IS NULL AND EXISTS ("
                "SELECT 1 FROM tasks WHERE tasks.board = runs.board "
                "AND tasks.current_run_id = coalesce(runs.for_run, runs.id) "
                "AND tasks.status = 'running')",
                expires=now + lease_ttl, now=now, id=run_id,
            )
            return cursor.rowcount == 1

        return self._write(work)

    def running_runs(self, node: str | None = None) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            mine = "" if node is None else " AND node = :node"
            rows = self._q(
                connection,
                f"SELECT * FROM runs WHERE board = :board AND ended_at IS NULL{mine} ORDER BY id",
                node=node,
            )
            return [run_from_row(row, self.slug) for row in rows]

        return self._read(work)

    def expired_runs(self, now: float | None = None) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            rows = self._q(
                connection,
                "SELECT * FROM runs WHERE board = :board AND ended_at IS NULL "
                "AND lease_expires_at <= :now ORDER BY id",
                now=self._dialect.now(connection) if now is None else now,
            )
            return [run_from_row(row, self.slug) for row in rows]

        return self._read(work)
