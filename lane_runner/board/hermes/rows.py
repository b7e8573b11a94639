"""Hermes kanban rows as lane-runner board records, and lane-runner words in Hermes's.

Pure mappings, no storage. Hermes has more statuses and outcomes than the board
contract (docs/ARCHITECTURE.md §5); each is shown as the nearest contract value,
and what lane-runner itself wrote is read back exactly from the run metadata it
keeps under ``lane_runner`` (``MARK``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lane_runner.board.model import (
    BlockKind,
    Comment,
    Event,
    Outcome,
    Run,
    Status,
    Task,
    TaskSettings,
)
from lane_runner.board.rows import Row

log = logging.getLogger(__name__)

#: The run-metadata key under which lane-runner records its own facts about a run.
MARK = "lane_runner"
#: Hermes's goal-loop budget when a goal-mode task names none (its ``goals`` default).
HERMES_GOAL_TURNS = 20
#: Lane-runner's claim locks: ``lane-runner:<node>:<nonce>``, one per claim.
LOCK_PREFIX = "lane-runner:"

STATUSES = {
    "triage": Status.TODO,
    "todo": Status.TODO,
    "scheduled": Status.TODO,
    "ready": Status.READY,
    "running": Status.RUNNING,
    "blocked": Status.BLOCKED,
    "review": Status.REVIEW,
    "done": Status.DONE,
    "archived": Status.ARCHIVED,
}
OUTCOMES = {
    "completed": Outcome.COMPLETED,
    "blocked": Outcome.BLOCKED,
    "reclaimed": Outcome.RECLAIMED,
    "scheduled": Outcome.RECLAIMED,
    "timed_out": Outcome.TIMED_OUT,
    "crashed": Outcome.FAILED,
    "spawn_failed": Outcome.FAILED,
    "gave_up": Outcome.FAILED,
}
#: How our run outcomes are written in Hermes's vocabulary (``task_runs.outcome``).
HERMES_OUTCOMES = {
    Outcome.RECLAIMED: "reclaimed",
    Outcome.EXPIRED: "reclaimed",
    Outcome.TIMED_OUT: "timed_out",
    Outcome.FAILED: "crashed",
}
#: Block kinds as Hermes files them; ``gave_up`` has no Hermes kind (an untyped block),
#: and Hermes has no ``budget``, ``checks``, ``review`` or ``denied``: each waits for a
#: person (a spent budget, checks or a review still failing, an approval denied), as
#: ``needs_input``.
HERMES_KINDS: dict[BlockKind, str | None] = {
    BlockKind.CAPABILITY: "capability",
    BlockKind.TRANSIENT: "transient",
    BlockKind.NEEDS_INPUT: "needs_input",
    BlockKind.GAVE_UP: None,
    BlockKind.BUDGET: "needs_input",
    BlockKind.CHECKS: "needs_input",
    BlockKind.REVIEW: "needs_input",
    BlockKind.DENIED: "needs_input",
}


def lock(node: str, nonce: str) -> str:
    return f"{LOCK_PREFIX}{node}:{nonce}"


def lock_node(claim_lock: str | None) -> str:
    """The node a claim lock names; Hermes's own claims show as ``hermes:<host:pid>``."""
    if not claim_lock:
        return ""
    if claim_lock.startswith(LOCK_PREFIX):
        return claim_lock[len(LOCK_PREFIX) :].rpartition(":")[0]
    return f"hermes:{claim_lock}"


def metadata(value: str | None) -> dict[str, Any]:
    """A run's metadata column as a dict; anything else Hermes stored reads as empty."""
    if not value:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        log.debug("run metadata is not JSON; read as empty")
        return {}
    return parsed if isinstance(parsed, dict) else {}


def mark(value: str | None) -> dict[str, Any]:
    """What lane-runner recorded about a run (``{}`` for runs it did not end)."""
    mine = metadata(value).get(MARK)
    return mine if isinstance(mine, dict) else {}


def result_of(text: str | None) -> dict[str, Any] | None:
    """``tasks.result`` as a worker result when lane-runner wrote it (JSON), else as text."""
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"text": text}
    return parsed if isinstance(parsed, dict) else {"text": text}


def skills_of(value: str | None) -> tuple[str, ...]:
    """``tasks.skills`` (Hermes's JSON list of skill names) as names; anything else, none."""
    try:
        named = json.loads(value) if value else []
    except ValueError:
        log.debug("skills column is not JSON; read as none")
        return ()
    return tuple(str(s) for s in named if s) if isinstance(named, list) else ()


def workspace(kind: str | None, path: str | None) -> str:
    """``dir:/path``, ``worktree:/path`` or ``scratch``, as ``hermes kanban create`` takes it."""
    kind = kind or "scratch"
    return f"{kind}:{path}" if path else kind


def block_kind(status: str, kind: str | None, failures: int) -> BlockKind | None:
    if STATUSES.get(status) is not Status.BLOCKED:
        return None
    if kind in ("capability", "transient", "needs_input"):
        return BlockKind(kind)
    return BlockKind.GAVE_UP if failures else BlockKind.NEEDS_INPUT


def run(row: Row, board: str, claimed_lock: str | None) -> Run:
    """A ``task_runs`` row; ``claimed_lock`` is the lock its claim event recorded."""
    ours = mark(row["metadata"])
    outcome = ours.get("outcome") or row["outcome"]
    started = float(row["started_at"])
    return Run(
        id=int(row["id"]),
        board=board,
        task_id=row["task_id"],
        node=lock_node(row["claim_lock"] or claimed_lock),
        claimed_at=started,
        lease_expires_at=float(row["claim_expires"] or row["ended_at"] or started),
        heartbeat_at=float(row["last_heartbeat_at"] or started),
        ended_at=float(row["ended_at"]) if row["ended_at"] is not None else None,
        outcome=_outcome(outcome) if row["ended_at"] is not None else None,
        reason=row["error"] or row["summary"],
    )


def _outcome(value: str | None) -> Outcome:
    """Ours when lane-runner ended the run (it recorded it), else Hermes's mapped."""
    if value is not None and value in {o.value for o in Outcome}:
        return Outcome(value)
    return OUTCOMES.get(value or "", Outcome.FAILED)


def task(row: Row, board: str, parents: tuple[str, ...], last: Row | None) -> Task:
    """A ``tasks`` row; ``last`` is its latest ended run (for reasons and cooldowns)."""
    status = row["status"]
    kind = block_kind(status, row["block_kind"], int(row["consecutive_failures"] or 0))
    ours = mark(last["metadata"]) if last is not None else {}
    completed = last if last is not None and last["outcome"] == "completed" else None
    created = float(row["created_at"])
    return Task(
        id=row["id"],
        board=board,
        title=row["title"],
        body=row["body"] or "",
        status=STATUSES.get(status, Status.TODO),
        assignee=row["assignee"],
        priority=int(row["priority"] or 0),
        parents=parents,
        workspace=workspace(row["workspace_kind"], row["workspace_path"]),
        max_runtime=float(row["max_runtime_seconds"]) if row["max_runtime_seconds"] else None,
        goal_turns=_goal_turns(row),
        current_run_id=row["current_run_id"],
        completed_run_id=int(completed["id"]) if completed is not None else None,
        next_attempt_at=ours.get("next_attempt_at") if status == "ready" else None,
        block_reason=_block_reason(row, last) if kind is not None else None,
        block_kind=kind,
        summary=completed["summary"] if completed is not None else None,
        result=result_of(row["result"]),
        failure_count=int(row["consecutive_failures"] or 0),
        max_retries=_max_retries(row["max_retries"]),
        settings=TaskSettings(model=row["model_override"] or None),
        skills=skills_of(row["skills"]),
        created_at=created,
        updated_at=_updated_at(row, last, created),
    )


def _block_reason(row: Row, last: Row | None) -> str | None:
    """Why a blocked task is blocked: its last run's summary or error, else the task's
    last failure."""
    reason: str | None = (last["summary"] or last["error"]) if last is not None else None
    failure: str | None = row["last_failure_error"]
    return reason or failure


def _goal_turns(row: Row) -> int:
    """The turns of a goal-mode task (Hermes's default when unset); 1 otherwise."""
    turns = (row["goal_max_turns"] or HERMES_GOAL_TURNS) if row["goal_mode"] else 1
    return max(1, int(turns))


def _max_retries(limit: int | None) -> int | None:
    """Hermes's max_retries is its failure limit (it gives up at that many failures);
    ours counts the retries after the first failure (rules.failure_limit_of)."""
    return None if limit is None else max(0, int(limit) - 1)


def _updated_at(row: Row, last: Row | None, created: float) -> float:
    """The latest moment the task or its last run changed."""
    return float(
        max(
            created,
            row["started_at"] or 0,
            row["completed_at"] or 0,
            (last["ended_at"] or 0) if last is not None else 0,
        )
    )


def event(row: Row, board: str) -> Event:
    data = metadata(row["payload"])
    return Event(
        int(row["id"]),
        board,
        row["task_id"],
        row["kind"],
        row["run_id"],
        float(row["created_at"]),
        data,
    )


def comment(row: Row, board: str) -> Comment:
    return Comment(
        int(row["id"]), board, row["task_id"], row["author"], row["body"], float(row["created_at"])
    )
