"""What a journal entry means and what ``recover`` would do with it, and why
(docs/ARCHITECTURE.md §4.2).

Pure: an entry as the journal's inspection judged it, plus the board's view of
its run, in; an explanation out. ``journal show`` prints it and ``journal
verify`` uses ``needs_attention``; both mirror ``journal/recovery.py`` step by
step, so an operator can read the plan before running ``recover``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from journal import Entry
from lane_runner.board import rules
from lane_runner.board.model import CompleteOutcome, Status

DIAGNOSTIC = "quarantine-diagnostic"
CARRY_RESULT = ("pending", "prepared")
UNFINISHED = ("pending", "prepared", "staging")


@dataclass(frozen=True)
class BoardView:
    """The board's side of one run; ``error`` when the board could not be read."""

    error: str | None = None
    task_status: Status | None = None  # None: the board has no such task
    current_run_id: int | None = None
    completed_run_id: int | None = None
    latest_ended_run_id: int | None = None
    result_matches: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "task_status": self.task_status,
            "current_run_id": self.current_run_id,
            "completed_run_id": self.completed_run_id,
            "latest_ended_run_id": self.latest_ended_run_id,
            "result_matches": self.result_matches,
        }


@dataclass(frozen=True)
class Plan:
    action: str
    why: str


def needs_attention(entry: Entry) -> bool:
    """Work left for recovery (an unfinished state) or an entry it will quarantine."""
    return entry.kind in UNFINISHED or not entry.valid


def explain(entry: Entry, view: BoardView | None, staged_state: str | None = None) -> Plan:
    """What recovery does with ``entry``; ``staged_state`` is the state a staged record holds."""
    if not entry.valid:
        return _invalid(entry)
    if entry.kind in CARRY_RESULT:
        order = (
            "prepared evidence is replayed first, oldest first; "
            if entry.kind == "prepared"
            else ""
        )
        return _commit(entry.run_id, view, order)
    if entry.kind == "staging":
        if staged_state in CARRY_RESULT:
            plan = _commit(None, view, "")
            return Plan(
                f"promote to prepared evidence, then {plan.action}",
                f"a retirement was interrupted while the record still held an accepted result; "
                f"{plan.why}",
            )
        return Plan(
            "finish-retirement",
            f"an interrupted retirement of a {staged_state or 'settled'} record; "
            "the staged name is removed",
        )
    return Plan(*_SETTLED.get(entry.kind, ("keep", "not a journal record; recovery leaves it")))


_SETTLED: dict[str, tuple[str, str]] = {
    "committed": ("keep", "the board took this result; retention removes the record by age"),
    "conflict": (
        "keep",
        "a valid result the board would no longer accept, kept in full for the operator",
    ),
    "lane-state": ("keep", "the task's lane state, read when the task runs again"),
    "candidate": ("keep", "a worker answer kept as evidence; retention bounds candidates"),
    "provider-result": ("keep", "a codex -o output file; retention bounds these"),
    "temp": ("remove-when-writer-gone", "a writer's temp file; removed once its process exited"),
    DIAGNOSTIC: ("keep", "a quarantine diagnostic for the operator; retention bounds them"),
}


def _invalid(entry: Entry) -> Plan:
    reason = entry.reason or "untrusted"
    if entry.kind == DIAGNOSTIC:
        return Plan(
            "keep", f"an unreadable quarantine diagnostic ({reason}); retention bounds them"
        )
    if entry.kind in ("lane-state", "candidate", "provider-result", "temp", "other"):
        return Plan("keep", f"not judged by recovery ({reason}); retention bounds it")
    if entry.kind == "pending":
        return Plan(
            "quarantine and make the run retryable",
            f"the record is not trustworthy ({reason}); run {entry.run_id} is handed back to "
            "ready as a failure so the task runs again",
        )
    return Plan("quarantine", f"the entry is not trustworthy ({reason}); a diagnostic replaces it")


def _commit(run_id: int | None, view: BoardView | None, order: str) -> Plan:
    if view is None:
        return Plan("commit", f"{order}the board decides (its view was not read)")
    if view.error is not None:
        return Plan("wait", f"{order}the board is unavailable ({view.error}); recover retries")
    if view.task_status is None or run_id is None:
        return Plan("conflict", f"{order}the board has no such task or run; the result is kept")
    outcome = rules.completion(
        run_id,
        status=view.task_status,
        current_run_id=view.current_run_id,
        completed_run_id=view.completed_run_id,
        latest_ended_run_id=view.latest_ended_run_id,
        result_matches=view.result_matches,
    )
    return _board_answer(outcome, run_id, view, order)


def _board_answer(outcome: CompleteOutcome, run: int, view: BoardView, order: str) -> Plan:
    if outcome is CompleteOutcome.COMPLETED:
        return Plan("commit", f"{order}the task is running run {run}: the board completes it")
    if outcome is CompleteOutcome.DUPLICATE:
        return Plan(
            "settle-committed",
            f"{order}the board already recorded this result for run {run}; only the files settle",
        )
    if outcome is CompleteOutcome.REPLAYED:
        return Plan(
            "commit",
            f"{order}the task is {view.task_status} and run {run} is its last ended run: "
            "the result is replayed onto the board",
        )
    return Plan(
        "conflict",
        f"{order}the board will not take run {run}'s result (task {view.task_status}, "
        f"current run {view.current_run_id}, completed by run {view.completed_run_id}); "
        "a conflict record keeps it in full",
    )
