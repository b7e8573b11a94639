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
    REVIEW = "review"
    """Done by its implementer, waiting for its reviewer (Hermes's ``review`` column):
    neither blocked nor ready. Our own boards' tables do not hold it yet
    (``FIRST_STATUSES``)."""


class Outcome(StrEnum):
    """How a run ended."""

    COMPLETED = "completed"
    BLOCKED = "blocked"
    RECLAIMED = "reclaimed"
    EXPIRED = "expired"
    TIMED_OUT = "timed_out"
    FAILED = "failed"
    REVIEWED = "reviewed"
    """A review run that gave its verdict (``ReviewRuns``); the task's own run goes on."""


class BlockKind(StrEnum):
    CAPABILITY = "capability"
    TRANSIENT = "transient"
    NEEDS_INPUT = "needs_input"
    GAVE_UP = "gave_up"
    BUDGET = "budget"
    """The task's or its board's day's budget is spent (``usage/budget.py``)."""
    CHECKS = "checks"
    """The task's acceptance checks still failed after the turns they may take."""
    REVIEW = "review"
    """The reviewer still requested changes after the rounds a review may take."""
    DENIED = "denied"
    """A person denied the approval the task waited for."""


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
    APPROVED = "approved"
    DENIED = "denied"
    REVIEW_REQUESTED = "review_requested"
    """A result waits for a reviewer (the review's; sent as a notification of that name)."""
    CHANGES_REQUESTED = "changes_requested"
    """A reviewer asked for changes (the review's; sent as a notification of that name)."""


class Decision(StrEnum):
    """A person's word on a task waiting for approval."""

    APPROVED = "approved"
    DENIED = "denied"
    REVIEW_REQUESTED = "review_requested"
    """A result waits for a reviewer (the review's; sent as a notification of that name)."""
    CHANGES_REQUESTED = "changes_requested"
    """A reviewer asked for changes (the review's; sent as a notification of that name)."""


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
    role: str = "implement"
    """``implement`` (the task's own run) or ``review`` (a reviewer's run, ``ReviewRuns``)."""
    for_run: int | None = None
    """A review run's: the implementer's run whose answer it reviews."""


#: The roles a run on an SQL board has: the task's own run, or a reviewer's beside it.
IMPLEMENT_ROLE, REVIEW_ROLE = "implement", "review"


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


class Approval(StrEnum):
    """What waits for a person's approval: nothing, the run, or the push (and
    ``after_done``) of a committed result (docs/approvals.md)."""

    NONE = "none"
    BEFORE_RUN = "before_run"
    """No run is claimed until it is approved."""
    BEFORE_PUSH = "before_push"
    """It runs and its result is committed; the push and ``after_done`` wait."""


@dataclass(frozen=True)
class TaskSettings:
    """How a task asks to be run, beyond its text: what verifies it, who reviews it, the
    model it pins and what waits for a person. Each field unset (empty, None) means
    "as the board's configuration says"; stored whole as one JSON column, so a new
    setting needs no schema step.
    """

    checks: tuple[str, ...] = ()
    """Acceptance commands run in the worktree after each completed answer."""
    review: str | None = None
    """``off``, ``auto`` (a healthy provider other than the implementer's) or a provider."""
    model: str | None = None
    """The model the CLI is asked for (its model flag), not the router's choice."""
    approval: Approval | None = None

    def is_empty(self) -> bool:
        return self == TaskSettings()


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
    settings: TaskSettings = field(default_factory=TaskSettings)
    decision: Decision | None = None
    """A person's word on the task as it stands (``task approve``, ``task deny``); None:
    nobody's yet, or an edit withdrew it."""
    decided_by: str | None = None
    decided_at: float | None = None

    @property
    def approved(self) -> bool:
        return self.decision is Decision.APPROVED
    skills: tuple[str, ...] = ()
    """Skills the task names for its worker (Hermes's ``skills``; ``run/pin.py``)."""


@dataclass(frozen=True)
class Event:
    id: int
    board: str
    task_id: str
    kind: str
    run_id: int | None
    at: float
    data: dict[str, Any] = field(default_factory=dict)


class NoticeState(StrEnum):
    """Where an outbox entry stands (``Outbox``): each moves once, pending to sent or dropped."""

    PENDING = "pending"
    SENT = "sent"
    DROPPED = "dropped"


@dataclass(frozen=True)
class Notice:
    """One notification in a board's outbox (``board/base.py`` ``Outbox``).

    ``id`` is stable (made from what happened, never from who saw it), so two runners
    deriving the same event write one entry, and a receiver can deduplicate the one
    send that may repeat (docs/notifications.md). ``data`` is what the message says.
    """

    id: str
    board: str
    kind: str
    task_id: str | None
    at: float
    data: dict[str, Any] = field(default_factory=dict)
    state: NoticeState = NoticeState.PENDING
    attempts: int = 0
    next_at: float = 0.0
    claimed_by: str | None = None
    sent_at: float | None = None
    error: str | None = None


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
class Implemented:
    """The implementer's accepted result a review is of, as its board recorded it: who
    made it (provider, effort) and the commit its change is counted from (``base``; None
    when no commit was made). A runner reviewing a task another runner implemented has
    no lane state of it: this is how it still asks another provider and shows the diff."""

    provider: str
    effort: str
    base: str | None


@dataclass(frozen=True)
class ReviewVerdict:
    """A reviewer's word on a task in review: approved (the task is done) or changes
    requested (back to its implementer with the findings)."""

    approved: bool
    summary: str
    findings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"approved": self.approved, "summary": self.summary,
                "findings": list(self.findings)}

    def describe(self) -> str:
        """The comment the implementer reads on its next run."""
        head = "review: approved" if self.approved else "review: changes requested"
        listed = "".join(f"\n- {finding}" for finding in self.findings)
        return f"{head}: {self.summary}{listed}"


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
    settings: TaskSettings = field(default_factory=TaskSettings)


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
    settings: TaskSettings | None = None
    """Replaces the task's settings whole."""
