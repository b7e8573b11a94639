"""Claims and leases on a Hermes board: Hermes's ``claim_task`` and ``heartbeat_claim``.

Only ``cli-*`` tasks are ours (docs/ARCHITECTURE.md §3.4): a Hermes profile's tasks and
runs are never claimed, renewed or rescued here.
"""

from __future__ import annotations

import math
import secrets
import sqlite3
import time
from collections.abc import Collection
from typing import Any

from lane_runner.board import pullrequests, rules
from lane_runner.board.hermes import rows, transaction
from lane_runner.board.hermes.access import AUTHOR, HermesAccess
from lane_runner.board.hermes.reviews import review_restored
from lane_runner.board.model import Approval, Claim, Run, Status
from lane_runner.names import is_lane_assignee

#: Ready, unclaimed tasks in claim order, each with the cooldown its latest ended run
#: records (docs/ARCHITECTURE.md §5): one statement per sweep, however many are cooling.
CANDIDATES = (
    "SELECT t.id, t.assignee, t.workspace_kind, t.workspace_path, "
    "(SELECT CASE WHEN json_valid(r.metadata) THEN "
    f"json_extract(r.metadata, '$.{rows.MARK}.next_attempt_at') END FROM task_runs r "
    "WHERE r.task_id = t.id AND r.ended_at IS NOT NULL ORDER BY r.id DESC LIMIT 1) "
    "AS next_attempt_at FROM tasks t WHERE t.status = 'ready' AND t.claim_lock IS NULL "
    "ORDER BY t.priority DESC, t.created_at, t.rowid"
)


class HermesClaims(HermesAccess):
    """Claiming a ready task, renewing its lease, and the runs whose lease is open."""

    def claim(
        self,
        node: str,
        lease_ttl: float,
        default_assignee: str,
        skip_workspaces: Collection[str] = (),
        default_approval: Approval = Approval.NONE,
    ) -> Claim | None:
        rules.require_lease_ttl(lease_ttl)
        if Approval(default_approval) is Approval.BEFORE_RUN:
            return None  # no approval can be recorded here (refusals.NO_GATE): none runs

        def work(connection: sqlite3.Connection) -> Claim | None:
            now = time.time()
            for candidate in connection.execute(CANDIDATES).fetchall():
                task_id, assignee = candidate["id"], candidate["assignee"]
                lane = rules.claim_assignee(assignee, default_assignee)
                until = candidate["next_attempt_at"]
                if lane is None or (isinstance(until, int | float) and until > now):
                    continue
                kind, path = candidate["workspace_kind"], candidate["workspace_path"]
                if skip_workspaces and rows.workspace(kind, path) in skip_workspaces:
                    continue
                if review_restored(self._kb, connection, task_id):
                    continue  # a review Hermes reclaimed to ready: back in the column
                if self._held(connection, task_id, now, say=True) is not None:
                    continue
                lock = rows.lock(node, secrets.token_hex(6))
                if assignee is None:
                    claimed = self._claim_unassigned(connection, task_id, lane, lease_ttl, lock)
                else:
                    claimed = self._kb.claim_task(
                        connection, task_id, ttl_seconds=math.ceil(lease_ttl), claimer=lock
                    )
                if claimed is None or claimed.current_run_id is None:
                    continue  # another runner won it, or Hermes found a parent not done
                run = self._run(connection, int(claimed.current_run_id))
                return Claim(self._task(connection, task_id), run)
            return None

        return self._call(work)

    def _claim_unassigned(
        self, connection: sqlite3.Connection, task_id: str, lane: str, lease_ttl: float, lock: str
    ) -> Any:
        """Hermes's ``assign_task`` to the default lane, then ``claim_task``: one transaction.

        The task is looked at again inside it: another runner may have taken it since
        the sweep read it (and Hermes refuses to reassign a running task).
        """
        with transaction.one_transaction(self._kb, connection) as nested:
            still = nested.execute(
                "SELECT 1 FROM tasks WHERE id = ? AND status = 'ready' AND claim_lock IS NULL "
                "AND assignee IS NULL",
                (task_id,),
            ).fetchone()
            if still is None or not self._kb.assign_task(nested, task_id, lane):
                return None
            return self._kb.claim_task(
                nested, task_id, ttl_seconds=math.ceil(lease_ttl), claimer=lock
            )

    def _held(
        self, connection: sqlite3.Connection, task_id: str, now: float, *, say: bool = False
    ) -> pullrequests.Hold | None:
        """The hold a pull request named in the task puts on its second run
        (``board/pullrequests.py``): in a comment not ours, or an ended run's summary or
        metadata, within the window. With ``say``, the reason is commented once. A task
        never run is not held: a first run is no second worker beside a pull request."""
        ran = connection.execute(
            "SELECT 1 FROM task_runs WHERE task_id = ? AND ended_at IS NOT NULL LIMIT 1",
            (task_id,),
        ).fetchone()
        if ran is None:
            return None
        since = now - pullrequests.WINDOW_SECONDS
        mentions = [
            pullrequests.Mention(row["body"], float(row["created_at"]), "a comment")
            for row in connection.execute(
                "SELECT body, created_at FROM task_comments WHERE task_id = ? AND author != ? "
                "AND created_at >= ?",
                (task_id, AUTHOR, since),
            )
        ] + [
            pullrequests.Mention(
                f"{row['summary'] or ''} {row['metadata'] or ''}", float(row["ended_at"]),
                f"run {row['id']}'s result",
            )
            for row in connection.execute(
                "SELECT id, summary, metadata, ended_at FROM task_runs WHERE task_id = ? "
                "AND ended_at >= ?",
                (task_id, since),
            )
        ]
        held = pullrequests.hold(mentions, now)
        if held is None or not say:
            return held
        said = connection.execute(
            "SELECT 1 FROM task_comments WHERE task_id = ? AND author = ? AND body = ?",
            (task_id, AUTHOR, held.describe()),
        ).fetchone()
        if said is None:
            self._kb.add_comment(connection, task_id, AUTHOR, held.describe())
        return held

    def lane_counts(self, default_assignee: str) -> dict[str, int]:
        """Counts of the tasks in our lanes (a profile's ready task is no work for us); a
        ready task a pull request holds counts as ``held``, not ready."""

        def work(connection: sqlite3.Connection) -> dict[str, int]:
            counted = dict.fromkeys((s.value for s in Status), 0)
            counted["held"] = 0
            now = time.time()
            for task_id, status, assignee in connection.execute(
                "SELECT id, status, assignee FROM tasks"
            ):
                if rules.claim_assignee(assignee, default_assignee) is None:
                    continue
                mapped = rows.STATUSES.get(status, Status.TODO)
                if mapped is Status.READY and self._held(connection, task_id, now):
                    counted["held"] += 1
                else:
                    counted[mapped.value] += 1
            return counted

        return self._call(work)

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        """Hermes's ``heartbeat_claim`` on this run's own lock, then its liveness note."""

        def work(connection: sqlite3.Connection) -> bool:
            run = connection.execute(
                "SELECT task_id, claim_lock FROM task_runs WHERE id = ? AND ended_at IS NULL",
                (run_id,),
            ).fetchone()
            if run is None or not run["claim_lock"]:
                return False
            task_id = run["task_id"]
            renewed = bool(
                self._kb.heartbeat_claim(
                    connection,
                    task_id,
                    ttl_seconds=math.ceil(lease_ttl),
                    claimer=run["claim_lock"],
                )
            )
            if renewed:
                self._kb.heartbeat_worker(
                    connection,
                    task_id,
                    note=f"{AUTHOR} run {run_id} alive",
                    expected_run_id=run_id,
                )
            return renewed

        return self._call(work)

    def running_runs(self, node: str | None = None) -> list[Run]:
        runs = self._open_runs()
        return [run for run in runs if node is None or run.node == node]

    def expired_runs(self, now: float | None = None) -> list[Run]:
        moment = time.time() if now is None else now
        return [run for run in self._open_runs() if run.lease_expires_at <= moment]

    def _open_runs(self) -> list[Run]:
        """Open runs of ``cli-*`` tasks: a Hermes profile's runs are never ours to touch."""

        def work(connection: sqlite3.Connection) -> list[Run]:
            found = connection.execute(
                "SELECT t.current_run_id, t.assignee FROM tasks t "
                "WHERE t.status = 'running' AND t.current_run_id IS NOT NULL ORDER BY 1"
            ).fetchall()
            return [
                self._run(connection, int(row[0]))
                for row in found
                if row["assignee"] and is_lane_assignee(row["assignee"])
            ]

        return self._call(work)
