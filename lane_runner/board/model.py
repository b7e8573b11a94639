"""Board records and vocabulary (docs/ARCHITECTURE.md §5). Plain data; no storage."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    TODO = "todo"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    BLOCKED = "blocked"
    ARCHIVED = "archived"


class Outcome(StrEnum):
    """How a run ended."""

    COMPLETED = "completed"
    BLOCKED = "blocked"
    RECLAIMED = "reclaimed"
    EXPIRED = "expired"
    TIMED_OUT = "timed_out"
    FAILED = "failed"


class BlockKind(StrEnum):
    CAPABILITY = "capability"
    TRANSIENT = "transient"
    NEEDS_INPUT = "needs_input"
    GAVE_UP = "gave_up"
    BUDGET = "budget"
    """The task's or its board's day's budget is spent (``usage/budget.py``)."""


class EventKind(StrEnum):
    """What an event row records; one per transition."""

    CREATED = "created"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    REPLAYED = "replayed"
    BLOCKED = "blocked"
    RECLAIMED = "reclaimed"
    GAVE_UP = "gave_up"
    PROMOTED = "promoted"
    UNBLOCKED = "unblocked"
    ARCHIVED = "archived"
    STOP_REQUESTED = "stop_requested"
    EDITED = "edited"
    RETRIED = "retried"


class CompleteOutcome(StrEnum):
    """What ``Board.complete`` did. ``DUPLICATE`` and ``REPLAYED`` count as committed."""

    COMPLETED = "completed"
    DUPLICATE = "duplicate"
    REPLAYED = "replayed"
    STALE = "stale"

    @property
    def committed(self) -> bool:
        return self is not CompleteOutcome.STALE


@dataclass(frozen=True)
class Run:
    id: int
    board: str
    task_id: str
    node: str
    claimed_at: float
    lease_expires_at: float
    heartbeat_at: float
    ended_at: float | None = None
    outcome: Outcome | None = None
    reason: str | None = None
    stop: StopRequest | None = None


@dataclass(frozen=True)
class StopRequest:
    """An operator asked for this run to end (``task stop``); its runner carries it out."""

    reason: str
    requeue: bool
    """True: the task goes back to ready; False: it is blocked (needs_input)."""
    at: float


@dataclass(frozen=True)
class BoardPause:
    """Nothing on this board is claimed, by any runner, until it is resumed."""

    reason: str
    at: float
    by: str


@dataclass(frozen=True)
class Task:
    id: str
    board: str
    title: str
    body: str
    status: Status
    assignee: str | None
    priority: int
    parents: tuple[str, ...]
    workspace: str | None
    max_runtime: float | None
    goal_turns: int
    current_run_id: int | None
    completed_run_id: int | None
    next_attempt_at: float | None
    block_reason: str | None
    block_kind: BlockKind | None
    summary: str | None
    result: dict[str, Any] | None
    failure_count: int
    created_at: float
    updated_at: float
    max_retries: int | None = None
    """Counted failures retried before the task is blocked gave_up; None: ``failure_limit``."""
    max_cost_usd: float | None = None
    """The task's dollar budget; None: the configured default (``max_cost_usd``)."""
    max_tokens: int | None = None
    """The task's token budget; None: the configured default (``max_tokens``)."""


@dataclass(frozen=True)
class Event:
    id: int
    board: str
    task_id: str
    kind: str
    run_id: int | None
    at: float
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Comment:
    id: int
    board: str
    task_id: str
    author: str
    body: str
    at: float


@dataclass(frozen=True)
class Claim:
    """A task this node now runs under ``run``."""

    task: Task
    run: Run


@dataclass(frozen=True)
class NewTask:
    """What ``Board.add_task`` needs; validated before anything is written."""

    title: str
    body: str = ""
    id: str | None = None
    assignee: str | None = None
    priority: int = 0
    parents: tuple[str, ...] = ()
    workspace: str | None = None
    max_runtime: float | None = None
    goal_turns: int = 1
    max_retries: int | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class TaskEdit:
    """What ``Board.edit`` changes: each field given (not None) replaces the task's.

    An empty ``assignee`` or ``workspace`` clears it (unassigned tasks take the default
    assignee; a task without a workspace is blocked when claimed).
    """

    title: str | None = None
    body: str | None = None
    assignee: str | None = None
    priority: int | None = None
    workspace: str | None = None
    max_runtime: float | None = None
    goal_turns: int | None = None
    max_retries: int | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
