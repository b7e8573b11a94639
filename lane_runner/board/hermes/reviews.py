"""Hermes's review column for our lanes (issue 42): a result sent to ``review``, a review
task claimed the way Hermes claims it, and the reviewer's verdict carried out.

Hermes 0.19's workers move a task to ``review`` when they are done; its dispatcher
claims it with ``claim_review_task`` (review → running, a run of its own) and spawns a
reviewer, who completes the task or sends it back to the worker. For a ``cli-*``
assignee Hermes's dispatcher skips the task (no such profile), so these are ours:

- ``submit_for_review``: the implementer's accepted result ends its run ``completed``
  (summary, result, metadata as a completion keeps them, the journal digest the
  witness of a replay) and the task goes to ``review`` instead of ``done``;
- ``claim_review``: Hermes's own ``claim_review_task`` on a review task of our lanes;
- ``end_review``: approved → Hermes's ``complete_task`` guarded on the review run (the
  implementer's result stays the task's); changes requested → the review run ends, the
  findings become a comment Hermes's worker context carries, and the task is ready for
  its implementer again.
"""

from __future__ import annotations

import math
import secrets
import sqlite3
import time
from typing import Any

from lane_runner.board.hermes import rows, transaction
from lane_runner.board.hermes.access import AUTHOR, HermesAccess
from lane_runner.board.model import Claim, CompleteOutcome, Implemented, ReviewVerdict
from lane_runner.names import is_lane_assignee

#: Skills by which a Hermes task asks for a review of its result (``--skill review``;
#: ``sdlc-review`` is the skill Hermes's own reviewers load).
REVIEW_SKILLS = frozenset({"review", "sdlc-review"})

#: What a result sent to review is held by while its implementer's follow-ups run (the
#: push, ``after_done``): ``hold:<run>:<the run's claim lock>`` in ``claim_lock``, until
#: the claim's expiry (the run's lease).
HOLD_PREFIX = "hold:"

#: Review tasks nobody holds, or whose hold expired, in Hermes's own dispatch order.
WAITING_REVIEWS = (
    "SELECT id, assignee, claim_lock FROM tasks WHERE status = 'review' AND ("
    f"claim_lock IS NULL OR (substr(claim_lock, 1, {len(HOLD_PREFIX)}) = '{HOLD_PREFIX}' "
    "AND COALESCE(claim_expires, 0) < ?)) ORDER BY priority DESC, created_at, rowid"
)


#: The key of a Hermes board's ``board.json`` by which every task of the board asks.
BOARD_KEY = "review"

#: A task's last ended run, when it was a review claimed from the column
#: (``claim_review_task``'s ``claimed`` event says ``source_status: review``).
LAST_REVIEW_RUN = (
    "SELECT r.id, r.metadata FROM task_runs r WHERE r.task_id = ? AND r.ended_at IS NOT NULL "
    "AND r.id = (SELECT MAX(id) FROM task_runs WHERE task_id = r.task_id) AND EXISTS ("
    "SELECT 1 FROM task_events e WHERE e.task_id = r.task_id AND e.run_id = r.id "
    "AND e.kind = 'claimed' AND json_valid(e.payload) "
    "AND json_extract(e.payload, '$.source_status') = 'review')"
)


#: A task's completed runs, newest first.
ACCEPTED_RUNS = (
    "SELECT metadata FROM task_runs WHERE task_id = ? AND outcome = 'completed' "
    "ORDER BY id DESC"
)


def implemented_of(ours: dict[str, Any]) -> Implemented | None:
    """An implementer's result from what lane-runner kept on its run (``route``,
    ``delivery``), or None for a run that is no implementer's (a review's)."""
    route, delivered = ours.get("route"), ours.get("delivery")
    if not isinstance(route, dict) or not isinstance(route.get("provider"), str):
        return None
    base = delivered.get("base") if isinstance(delivered, dict) else None
    return Implemented(
        route["provider"], str(route.get("effort") or "medium"),
        base if isinstance(base, str) else None,
    )


def held_by(hold: str) -> str:
    """The run's claim lock a hold (``hold:<run>:<lock>``) keeps."""
    return hold[len(HOLD_PREFIX):].partition(":")[2]


def review_restored(kb: Any, connection: sqlite3.Connection, task_id: str) -> bool:
    """A ready task whose last run was a review that gave no verdict goes back to
    ``review``; True when it did.

    Hermes's dispatcher reclaims any ``running`` task whose claim expired
    (``release_stale_claims``, ``reclaim_task``) to ``ready``, a review run of our
    lanes too when its runner died first. Claimed as ready, the implementer would run
    again over a result that was accepted and committed: the review it was waiting
    for is restored instead, as if Hermes had handed the review back. A review that
    asked for changes also leaves its task ready, rightly: its run carries our verdict.
    """
    run = connection.execute(LAST_REVIEW_RUN, (task_id,)).fetchone()
    if run is None or rows.mark(run["metadata"]).get("review") is not None:
        return False
    with kb.write_txn(connection):
        moved = connection.execute(
            "UPDATE tasks SET status = 'review' WHERE id = ? AND status = 'ready' "
            "AND claim_lock IS NULL",
            (task_id,),
        )
        if moved.rowcount != 1:
            return False
        kb._append_event(
            connection, task_id, "review_restored",
            {"reason": f"review run {run['id']} ended without a verdict", "by": AUTHOR},
            run_id=run["id"],
        )
    return True


def asks_for_review(skills: tuple[str, ...], board_asks: bool) -> bool:
    """Whether a result goes to ``review``: the board asks (``"review": true`` in its
    ``board.json``), or the task's skills name a review skill."""
    return board_asks or any(skill in REVIEW_SKILLS for skill in skills)


class HermesReviews(HermesAccess):
    """The review column: submissions, claims and verdicts, each guarded on its run."""

    def asks_for_review(self, connection: sqlite3.Connection, task_id: str) -> bool:
        row = connection.execute("SELECT skills FROM tasks WHERE id = ?", (task_id,)).fetchone()
        board_asks = self._kb.read_board_metadata(self.slug).get(BOARD_KEY) is True
        return asks_for_review(rows.skills_of(row["skills"] if row else None), board_asks)

    def submit_for_review(
        self, connection: Any, task_id: str, run_id: int,
        result: str, summary: str, metadata: dict[str, Any],
    ) -> bool:
        """The implementer's run ends ``completed`` and its task goes to ``review``, in one
        Hermes write transaction guarded on the run (Hermes has no call for it).

        The run's claim stays as a hold (``HOLD_PREFIX``) until its follow-ups end
        (``release_hold``), so no runner's reviewer starts while this one still pushes
        or runs ``after_done``; it expires with the run's lease, and the runner's
        restart releases its own (``release_holds``)."""
        with self._kb.write_txn(connection):
            moved = connection.execute(
                "UPDATE tasks SET status = 'review', result = ?, "
                "claim_lock = ? || COALESCE(claim_lock, ''), worker_pid = NULL, "
                "consecutive_failures = 0 "
                "WHERE id = ? AND status = 'running' AND current_run_id = ?",
                (result, f"{HOLD_PREFIX}{run_id}:", task_id, run_id),
            )
            if moved.rowcount != 1:
                return False
            self._kb._end_run(
                connection, task_id, outcome="completed", status="completed",
                summary=summary, metadata=metadata,
            )
            self._kb._append_event(
                connection, task_id, "review_requested",
                {"summary": summary[:500], "by": AUTHOR}, run_id=run_id,
            )
        return True

    def claim_review(
        self, node: str, lease_ttl: float, busy: frozenset[str] = frozenset()
    ) -> Claim | None:
        """A review task of a ``cli-*`` lane, claimed by Hermes's ``claim_review_task``."""

        def work(connection: sqlite3.Connection) -> Claim | None:
            for row in connection.execute(WAITING_REVIEWS, (time.time(),)).fetchall():
                if not row["assignee"] or not is_lane_assignee(row["assignee"]):
                    continue  # a Hermes profile's review: its dispatcher's
                if row["id"] in busy:
                    continue  # its implementer's run is still ending in this runner
                if row["claim_lock"] is not None:
                    self._unhold(connection, "id = ? AND claim_lock = ?",
                                 (row["id"], row["claim_lock"]))  # its lease ran out
                claimed = self._kb.claim_review_task(
                    connection, row["id"], ttl_seconds=math.ceil(lease_ttl),
                    claimer=rows.lock(node, secrets.token_hex(6)),
                )
                if claimed is None or claimed.current_run_id is None:
                    continue  # another runner, or Hermes, took it first
                run = self._run(connection, int(claimed.current_run_id))
                return Claim(self._task(connection, row["id"]), run)
            return None

        return self._call(work)

    def end_review(
        self, run_id: int, approved: bool, summary: str, findings: list[str]
    ) -> CompleteOutcome:
        """The reviewer's verdict on the review run ``run_id`` (``ReviewVerdict``)."""
        verdict = ReviewVerdict(approved, summary, tuple(findings))

        def work(connection: sqlite3.Connection) -> CompleteOutcome:
            task = connection.execute(
                "SELECT id, result FROM tasks WHERE current_run_id = ? AND status = 'running'",
                (run_id,),
            ).fetchone()
            if task is None:
                return CompleteOutcome.STALE
            mark = {rows.MARK: {"review": verdict.to_dict(), "run_id": run_id}}
            if verdict.approved:
                done = self._kb.complete_task(
                    connection, task["id"], result=task["result"], summary=summary,
                    metadata={"findings": list(findings), **mark}, expected_run_id=run_id,
                )
                return CompleteOutcome.COMPLETED if done else CompleteOutcome.STALE
            return self._send_back(connection, task["id"], run_id, verdict, mark)

        return self._call(work)

    def _send_back(
        self, connection: sqlite3.Connection, task_id: str, run_id: int,
        verdict: ReviewVerdict, mark: dict[str, Any],
    ) -> CompleteOutcome:
        """Changes requested: the review run ends, the findings are a comment on the task
        (Hermes's worker context shows the implementer its comments), the task is ready."""
        with transaction.one_transaction(self._kb, connection) as nested:
            moved = nested.execute(
                "UPDATE tasks SET status = 'ready', claim_lock = NULL, claim_expires = NULL, "
                "worker_pid = NULL WHERE id = ? AND status = 'running' AND current_run_id = ?",
                (task_id, run_id),
            )
            if moved.rowcount != 1:
                return CompleteOutcome.STALE
            self._kb._end_run(
                nested, task_id, outcome="reclaimed", status="reclaimed",
                summary=verdict.summary, metadata=mark,
            )
            self._kb.add_comment(nested, task_id, AUTHOR, verdict.describe())
            self._kb._append_event(
                nested, task_id, "review_changes_requested",
                {"findings": list(verdict.findings)[:20], "by": AUTHOR}, run_id=run_id,
            )
        return CompleteOutcome.COMPLETED

    def release_hold(self, task_id: str, run_id: int) -> bool:
        """The hold run ``run_id``'s result put on its review (``submit_for_review``)
        released: its follow-ups ended. False when there was none (expired, taken)."""
        return self._call(lambda connection: self._unhold(
            connection, "id = ? AND substr(claim_lock, 1, length(?)) = ?",
            (task_id, *[f"{HOLD_PREFIX}{run_id}:"] * 2),
        )) > 0

    def release_holds(self, node: str) -> int:
        """Every hold runs of ``node`` left (its process is gone: a restart, ``recover``)."""

        def work(connection: sqlite3.Connection) -> int:
            held = connection.execute(
                "SELECT id, claim_lock FROM tasks WHERE status = 'review' "
                f"AND substr(claim_lock, 1, {len(HOLD_PREFIX)}) = '{HOLD_PREFIX}'"
            ).fetchall()
            return sum(
                self._unhold(connection, "id = ? AND claim_lock = ?", (row["id"], lock))
                for row in held
                if rows.lock_node(held_by(lock := row["claim_lock"])) == node
            )

        return self._call(work)

    def _unhold(self, connection: sqlite3.Connection, where: str, values: tuple[Any, ...]) -> int:
        """Holds on review tasks matching ``where`` released (the task claimable again)."""
        with self._kb.write_txn(connection):
            released = connection.execute(
                "UPDATE tasks SET claim_lock = NULL, claim_expires = NULL "
                f"WHERE status = 'review' AND {where}",
                values,
            )
        return int(released.rowcount)

    def implemented(self, task_id: str) -> Implemented | None:
        """The route and delivery our implementer's completed run keeps in its metadata
        (the newest such run: a review approved ends ``completed`` too, without them)."""

        def work(connection: sqlite3.Connection) -> Implemented | None:
            for row in connection.execute(ACCEPTED_RUNS, (task_id,)):
                found = implemented_of(rows.mark(row["metadata"]))
                if found is not None:
                    return found
            return None

        return self._call(work)

    def hand_back_review(self, run_id: int, reason: str) -> bool:
        """The review run ends ``crashed`` (Hermes's word for a worker that gave no
        answer) and the task waits in ``review`` for the next reviewer."""

        def work(connection: sqlite3.Connection) -> bool:
            with self._kb.write_txn(connection):
                task = connection.execute(
                    "SELECT id FROM tasks WHERE current_run_id = ? AND status = 'running'",
                    (run_id,),
                ).fetchone()
                if task is None:
                    return False
                connection.execute(
                    "UPDATE tasks SET status = 'review', claim_lock = NULL, "
                    "claim_expires = NULL, worker_pid = NULL WHERE id = ?",
                    (task["id"],),
                )
                self._kb._end_run(
                    connection, task["id"], outcome="crashed", status="crashed", error=reason,
                    metadata={rows.MARK: {"review": None, "reason": reason}},
                )
                self._kb._append_event(
                    connection, task["id"], "review_handed_back",
                    {"reason": reason[:500], "by": AUTHOR}, run_id=run_id,
                )
            return True

        return self._call(work)
