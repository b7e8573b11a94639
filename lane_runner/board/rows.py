"""Stored rows to board records, shared by every backend.

Both stores keep the same columns under the same names (results and event data
as JSON text), so one mapping serves both and a record never depends on which
backend it came from.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from lane_runner.board.model import (
    IMPLEMENT_ROLE,
    Approval,
    BlockKind,
    Decision,
    Outcome,
    Run,
    Status,
    StopRequest,
    Task,
    TaskSettings,
)


class Row(Protocol):
    """A stored row read by column name (``sqlite3.Row``, psycopg's dict rows)."""

    def __getitem__(self, column: str, /) -> Any: ...

    def keys(self) -> Any: ...


def task_from_row(row: Row, board: str, parents: tuple[str, ...]) -> Task:
    return Task(
        id=row["id"],
        board=board,
        title=row["title"],
        body=row["body"],
        status=Status(row["status"]),
        assignee=row["assignee"],
        priority=row["priority"],
        parents=parents,
        workspace=row["workspace"],
        max_runtime=row["max_runtime"],
        goal_turns=row["goal_turns"],
        current_run_id=row["current_run_id"],
        completed_run_id=row["completed_run_id"],
        next_attempt_at=row["next_attempt_at"],
        block_reason=row["block_reason"],
        block_kind=BlockKind(row["block_kind"]) if row["block_kind"] else None,
        summary=row["summary"],
        result=orjson.loads(row["result"]) if row["result"] is not None else None,
        failure_count=row["failure_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        max_retries=row["max_retries"],
        max_cost_usd=row["max_cost_usd"],
        max_tokens=row["max_tokens"],
        settings=settings_from_column(row["settings"]),
        decision=Decision(row["decision"]) if row["decision"] else None,
        decided_by=row["decided_by"],
        decided_at=row["decided_at"],
    )


def settings_column(settings: TaskSettings) -> str | None:
    """The stored ``settings`` column: JSON naming only what is set; NULL for none."""
    if settings.is_empty():
        return None
    document: dict[str, Any] = {}
    if settings.checks:
        document["checks"] = list(settings.checks)
    for name in ("review", "model", "approval"):
        value = getattr(settings, name)
        if value is not None:
            document[name] = str(value)
    return orjson.dumps(document).decode()


def settings_from_column(stored: str | None) -> TaskSettings:
    """The settings a stored column holds. Keys this version does not know (a newer
    runner's) are passed over, so an older runner still runs the task as it can."""
    if not stored:
        return TaskSettings()
    document = orjson.loads(stored)
    approval = document.get("approval")
    return TaskSettings(
        checks=tuple(document.get("checks") or ()),
        review=document.get("review"),
        model=document.get("model"),
        approval=Approval(approval) if approval else None,
    )


def run_from_row(row: Row, board: str) -> Run:
    return Run(
        id=row["id"],
        board=board,
        task_id=row["task_id"],
        node=row["node"],
        claimed_at=row["claimed_at"],
        lease_expires_at=row["lease_expires_at"],
        heartbeat_at=row["heartbeat_at"],
        ended_at=row["ended_at"],
        outcome=Outcome(row["outcome"]) if row["outcome"] else None,
        reason=row["reason"],
        stop=stop_from_row(row),
        role=_column(row, "role") or IMPLEMENT_ROLE,
        for_run=_column(row, "for_run"),
    )


def _column(row: Row, name: str) -> Any:
    """A column a row may lack (the claim's result names the first columns only)."""
    return row[name] if name in row.keys() else None  # noqa: SIM118 (sqlite3.Row: in = values)


def stop_from_row(row: Row) -> StopRequest | None:
    if row["stop_requested_at"] is None:
        return None
    return StopRequest(
        row["stop_reason"] or "", bool(row["stop_requeue"]), row["stop_requested_at"]
    )
