"""What a board event means as a notification, and its words (pure).

A notification's id is made from what happened (the board, the event's id, the kind),
never from who noticed it, so every runner deriving the same event names it alike and
a receiver can drop the one repeat at-least-once delivery allows (docs/notifications.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from lane_runner import display, redact
from lane_runner.board.model import Approval, BlockKind, Event, EventKind, Notice, Task
from lane_runner.config.people import destination


class Kind(StrEnum):
    """What a notification is about (``config.people.NOTIFY_EVENTS``, the same names)."""

    DONE = "done"
    BLOCKED = "blocked"
    GAVE_UP = "gave_up"
    REVIEW_REQUESTED = "review_requested"
    CHANGES_REQUESTED = "changes_requested"
    APPROVAL_NEEDED = "approval_needed"
    BUDGET_SPENT = "budget_spent"
    BREAKER_TRIPPED = "breaker_tripped"
    NOT_CLAIMING = "not_claiming"


#: Board event kinds that are notifications as they are (the review's): each names its
#: kind by the event's own name.
_AS_THEY_ARE = {
    EventKind.REVIEW_REQUESTED.value: Kind.REVIEW_REQUESTED,
    EventKind.CHANGES_REQUESTED.value: Kind.CHANGES_REQUESTED,
}
#: The events after which a task may wait for approval: it became ready (created,
#: promoted, unblocked, retried), an edit withdrew its approval, or it was done.
APPROVAL_MOMENTS = frozenset(
    ("created", "promoted", "unblocked", "retried", "edited", "completed", "replayed")
)
#: A line of a message is cut to this many characters.
LINE_CHARS = 300


@dataclass(frozen=True)
class Message:
    """What one notification says; every field already redacted and bounded."""

    id: str
    kind: Kind
    board: str
    task_id: str | None
    title: str
    outcome: str
    line: str
    cost_usd: float | None
    more: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind.value}

    @classmethod
    def from_dict(cls, found: Mapping[str, Any]) -> Message:
        cost = found.get("cost_usd")
        return cls(
            id=str(found["id"]), kind=Kind(found["kind"]), board=str(found["board"]),
            task_id=None if found.get("task_id") is None else str(found["task_id"]),
            title=str(found.get("title", "")), outcome=str(found.get("outcome", "")),
            line=str(found.get("line", "")), cost_usd=None if cost is None else float(cost),
            more=str(found.get("more", "")),
        )

    def subject(self) -> str:
        where = f"{self.board}/{self.task_id}" if self.task_id else self.board
        title = f": {self.title}" if self.title else ""
        return f"lane-runner {where} {self.outcome}{title}"

    def body(self) -> str:
        lines = [f"board: {self.board}"]
        if self.task_id:
            lines.append(f"task: {self.task_id} ({self.title})" if self.title else
                         f"task: {self.task_id}")
        lines.append(f"outcome: {self.outcome}")
        if self.line:
            lines.append(f"why: {self.line}")
        if self.cost_usd is not None:
            lines.append(f"cost: ${self.cost_usd:.2f}")
        lines += [f"more: {self.more}", f"id: {self.id}"]
        return "\n".join(lines)


def first_line(text: str | None) -> str:
    """The first non-empty line of ``text``, redacted, escaped and bounded."""
    for line in (text or "").splitlines():
        if line.strip():
            return display.escaped(redact.text(line.strip()))[:LINE_CHARS]
    return ""


def kind_of(event: Event) -> Kind | None:
    """The notification an event is, if any."""
    if event.kind in ("completed", "replayed"):
        return Kind.DONE
    if event.kind == "gave_up":
        return Kind.GAVE_UP
    if event.kind == "blocked":
        block = event.data.get("block_kind")
        if block == BlockKind.BUDGET.value:
            return Kind.BUDGET_SPENT
        return Kind.GAVE_UP if block == BlockKind.GAVE_UP.value else Kind.BLOCKED
    return _AS_THEY_ARE.get(event.kind)


def _outcome(kind: Kind, event: Event) -> str:
    if kind is Kind.BLOCKED:
        return f"blocked ({event.data.get('block_kind', 'unknown')})"
    return kind.value.replace("_", " ")


def from_event(
    event: Event, task: Task | None, cost_usd: float | None
) -> Message | None:
    """The message of a board event (``task``: as it is now; None once deleted)."""
    kind = kind_of(event)
    if kind is None:
        return None
    reason = event.data.get("reason") or event.data.get("summary")
    if kind is Kind.DONE:
        reason = task.summary if task is not None else None
    return Message(
        id=f"{event.board}/{event.id}/{kind.value}",
        kind=kind,
        board=event.board,
        task_id=event.task_id,
        title=first_line(task.title if task is not None else "(deleted)"),
        outcome=_outcome(kind, event),
        line=first_line(reason if isinstance(reason, str) else None),
        cost_usd=cost_usd,
        more=f"lane-runner task show {event.task_id} --board {event.board}",
    )


def approval_needed(event: Event, task: Task, waiting: Approval) -> Message:
    """``task`` waits for approval (``waiting``: before its run, or its push) since
    ``event``: one message per such moment."""
    what = waiting.value.replace("_", " ")
    return Message(
        id=f"{event.board}/{event.id}/{Kind.APPROVAL_NEEDED.value}",
        kind=Kind.APPROVAL_NEEDED,
        board=event.board,
        task_id=task.id,
        title=first_line(task.title),
        outcome=f"approval needed {what}",
        line=f"lane-runner task approve {task.id} --board {event.board} (or task deny)",
        cost_usd=None,
        more=f"lane-runner task show {task.id} --board {event.board}",
    )


def cost_of(event: Event) -> float | None:
    """The task's spend a completion's metadata carries (``run/accepted.py``), if any."""
    usage = event.data.get("metadata", {}).get("usage", {}) if isinstance(
        event.data.get("metadata"), dict) else {}
    task = usage.get("task") if isinstance(usage, dict) else None
    cost = task.get("cost_usd") if isinstance(task, dict) else None
    return float(cost) if isinstance(cost, int | float) else None


def not_claiming(board: str, ready: list[Task], now: float, minutes: float) -> Message | None:
    """Ready work nobody claimed for ``minutes``: one message per oldest waiting task
    and the moment it became claimable (so it is said once, by whichever runner)."""
    waiting = [
        (max(task.updated_at, task.next_attempt_at or 0.0), task) for task in ready
    ]
    late = sorted((since, task.id, task) for since, task in waiting if now - since >= minutes * 60)
    if not late:
        return None
    since, _, oldest = late[0]
    return Message(
        id=f"{board}/not_claiming/{oldest.id}/{since:.0f}",
        kind=Kind.NOT_CLAIMING,
        board=board,
        task_id=oldest.id,
        title=first_line(oldest.title),
        outcome="not claimed",
        line=f"{len(late)} ready task(s) unclaimed for {minutes:g}+ minutes",
        cost_usd=None,
        more=f"lane-runner status; lane-runner task ls --board {board} --status ready",
    )


def day_budget_spent(board: str, why: str, day: str) -> Message:
    """The board's day's budget is spent: nothing more is claimed there until the next
    UTC day (once per board and day)."""
    return Message(
        id=f"{board}/budget/{day}",
        kind=Kind.BUDGET_SPENT,
        board=board,
        task_id=None,
        title="",
        outcome="budget spent",
        line=first_line(why),
        cost_usd=None,
        more=f"lane-runner usage --board {board}; lane-runner status",
    )


def breaker_tripped(board: str, scope: str, reason: str, tripped_at: float) -> Message:
    """The storm breaker marked ``scope`` (the board, or a workspace of it) broken."""
    return Message(
        id=f"{board}/breaker/{destination(scope)}/{tripped_at:.0f}",
        kind=Kind.BREAKER_TRIPPED,
        board=board,
        task_id=None,
        title="",
        outcome="breaker tripped",
        line=first_line(f"{scope}: {reason}"),
        cost_usd=None,
        more="lane-runner health",
    )


def notices(message: Message, urls: list[str], at: float) -> list[Notice]:
    """The outbox entries of ``message``: one per destination, so a destination that
    fails is retried alone and the others are not sent twice."""
    return [
        Notice(
            id=f"{message.id}>{destination(url)}",
            board=message.board,
            kind=message.kind.value,
            task_id=message.task_id,
            at=at,
            data={**message.to_dict(), "destination": destination(url)},
        )
        for url in urls
    ]
