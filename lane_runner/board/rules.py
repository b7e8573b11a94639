"""The board's decisions, apart from storage (docs/ARCHITECTURE.md §5).

Every backend asks these functions what a transition does and only then writes,
so the exact-run, replay, failure and promotion rules are the same everywhere
and are tested without a database.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import orjson

from lane_runner.board.model import (
    Approval,
    CompleteOutcome,
    NewTask,
    Outcome,
    Status,
    Task,
    TaskEdit,
    TaskSettings,
)
from lane_runner.board.rows import settings_column
from lane_runner.errors import UsageError
from lane_runner.names import check_name, is_lane_assignee, parse_lane

MAX_BODY_BYTES = 256 * 1024
NUL, REPLACEMENT = "\x00", "\ufffd"
RECLAIM_OUTCOMES = frozenset(
    {Outcome.RECLAIMED, Outcome.EXPIRED, Outcome.TIMED_OUT, Outcome.FAILED}
)


def new_task_id() -> str:
    """A short readable id; collisions are checked by the backend before use."""
    return f"t-{secrets.token_hex(4)}"


def check_text(what: str, text: str) -> None:
    """PostgreSQL text cannot hold NUL, so no backend takes it from a person."""
    if NUL in text:
        raise UsageError(f"the {what} contains a NUL character; remove it and try again")


def storable(value: Any) -> Any:
    """``value`` with every NUL character in its strings (keys too) replaced by U+FFFD.

    For text the runner writes on its own (worker results, provider messages): a
    model may emit ``\\u0000``, and a board that refused it would leave the result
    pending forever. Applied before the journal, so replays offer the same result.
    """
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, list):
        return [storable(item) for item in value]
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    return value


def check_comment(body: str) -> None:
    """UsageError unless a person or the runner may post ``body`` (nothing is written)."""
    if not body.strip():
        raise UsageError("a comment needs some text")
    if len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise UsageError(f"a comment is limited to {MAX_BODY_BYTES // 1024} KiB")
    check_text("comment", body)


def checked_task(new: NewTask) -> NewTask:
    """``new`` normalised, or UsageError naming the first bad field (nothing is written)."""
    title = _checked_title(new.title)
    _check_body(new.body)
    if new.id is not None:
        check_name("task id", new.id)
    assignee = new.assignee or None
    if assignee is not None:
        parse_lane(assignee)
    for parent in new.parents:
        check_name("parent task id", parent)
    _check_limits(new.goal_turns, new.max_runtime, new.max_retries)
    _check_budgets(new.max_cost_usd, new.max_tokens)
    return replace(
        new, title=title, assignee=assignee, parents=tuple(dict.fromkeys(new.parents)),
        settings=checked_settings(new.settings),
    )


def checked_edit(edit: TaskEdit) -> TaskEdit:
    """``edit`` normalised, each given field checked as ``checked_task`` checks it, or
    UsageError naming the first bad one (nothing is written)."""
    if edit.title is not None:
        edit = replace(edit, title=_checked_title(edit.title))
    if edit.body is not None:
        _check_body(edit.body)
    if edit.assignee:
        parse_lane(edit.assignee)
    if edit.workspace:
        check_text("workspace", edit.workspace)
    _check_limits(edit.goal_turns, edit.max_runtime, edit.max_retries)
    _check_budgets(edit.max_cost_usd, edit.max_tokens)
    if edit.settings is not None:
        edit = replace(edit, settings=checked_settings(edit.settings))
    return edit


#: At most this many acceptance checks on one task, each at most this long.
MAX_CHECKS, MAX_SETTING_CHARS = 20, 4096
#: ``review``'s words besides a provider's name.
REVIEW_WORDS = ("off", "auto")


def checked_settings(settings: TaskSettings) -> TaskSettings:
    """``settings`` normalised (blank values unset, checks de-duplicated in order), or
    UsageError naming the bad one. Whether a reviewer or model names something the
    runner can run is the runner's to say when it runs the task (a board may be served
    by runners with other CLIs)."""
    model = (settings.model or "").strip() or None
    if model is not None:
        _check_setting("model", model)
    return replace(
        settings, checks=_checked_checks(settings.checks),
        review=_checked_review(settings.review), model=model,
    )


def _checked_checks(given: tuple[str, ...]) -> tuple[str, ...]:
    checks = tuple(dict.fromkeys(c.strip() for c in given if c.strip()))
    if len(checks) > MAX_CHECKS:
        raise UsageError(f"a task takes at most {MAX_CHECKS} checks, not {len(checks)}")
    for command in checks:
        _check_setting("check", command)
    return checks


def _checked_review(given: str | None) -> str | None:
    review = (given or "").strip() or None
    if review is not None and review not in REVIEW_WORDS and not _PROVIDER_NAME.fullmatch(review):
        raise UsageError(
            f"review {review!r}: use 'off', 'auto' (a provider other than the implementer's) "
            "or the name of a provider this runner has (lane-runner doctor lists them)"
        )
    return review


_PROVIDER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def _check_setting(what: str, value: str) -> None:
    check_text(what, value)
    if len(value) > MAX_SETTING_CHARS:
        raise UsageError(f"the {what} is longer than {MAX_SETTING_CHARS} characters")
    if any(ord(ch) < 32 and ch not in "\t" for ch in value):
        raise UsageError(f"the {what} {value[:60]!r} holds a control character; remove it")


def _check_budgets(max_cost_usd: float | None, max_tokens: int | None) -> None:
    if max_cost_usd is not None and not max_cost_usd > 0:
        raise UsageError(f"max cost must be more than 0 dollars, not {max_cost_usd:g}")
    if max_tokens is not None and not max_tokens > 0:
        raise UsageError(f"max tokens must be more than 0, not {max_tokens}")


#: The task columns ``Board.edit`` may change (each a ``TaskEdit`` field of that name).
EDITABLE = (
    "title", "body", "assignee", "priority", "workspace", "max_runtime", "goal_turns",
    "max_retries", "max_cost_usd", "max_tokens", "settings",
)


def edit_changes(task: Task, edit: TaskEdit) -> dict[str, Any]:
    """The columns ``edit`` changes on ``task`` and their new values; empty when nothing
    differs. An empty assignee or workspace becomes NULL (cleared)."""
    changes: dict[str, Any] = {}
    for name in EDITABLE:
        value = getattr(edit, name)
        if value is None:
            continue
        if name in ("assignee", "workspace") and value == "":
            value = None
        if value != getattr(task, name):
            changes[name] = settings_column(value) if name == "settings" else value
    return changes


def _checked_title(title: str) -> str:
    title = title.strip()
    if not title:
        raise UsageError("a task needs a non-empty --title")
    check_text("title", title)
    return title


def _check_body(body: str) -> None:
    check_text("body", body)
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise UsageError(
            f"task body is {size} bytes, over the {MAX_BODY_BYTES // 1024} KiB limit; "
            "put the detail in a file in the workspace and point to it"
        )


def _check_limits(
    goal_turns: int | None, max_runtime: float | None, max_retries: int | None
) -> None:
    if goal_turns is not None and goal_turns < 1:
        raise UsageError(f"goal turns must be at least 1, not {goal_turns}")
    if max_runtime is not None and not max_runtime > 0:
        raise UsageError(f"max runtime must be more than 0 seconds, not {max_runtime:g}")
    if max_retries is not None and not 0 <= max_retries <= MAX_RETRIES:
        raise UsageError(f"max retries must be from 0 to {MAX_RETRIES}, not {max_retries}")


def initial_status(parent_statuses: Iterable[Status]) -> Status:
    """``ready`` when every parent is done (or there are none), else ``todo``."""
    return Status.READY if all(s is Status.DONE for s in parent_statuses) else Status.TODO


def ancestors(task_id: str, parents_of: Callable[[str], Iterable[str]]) -> set[str]:
    """Every task reachable from ``task_id`` through parent links (not itself unless cyclic)."""
    seen: set[str] = set()
    frontier = list(parents_of(task_id))
    while frontier:
        current = frontier.pop()
        if current not in seen:
            seen.add(current)
            frontier.extend(parents_of(current))
    return seen


def would_cycle(
    task_id: str, parents: Iterable[str], parents_of: Callable[[str], Iterable[str]]
) -> bool:
    """True when giving ``task_id`` these parents would make it its own ancestor."""
    return any(
        parent == task_id or task_id in ancestors(parent, parents_of) for parent in parents
    )


def claim_assignee(assignee: str | None, default_assignee: str) -> str | None:
    """The assignee a claim runs under, or None when the task belongs to another lane.

    Unassigned tasks are ours only when a default assignee is configured.
    """
    if assignee is None:
        return default_assignee or None
    return assignee if is_lane_assignee(assignee) else None


def same_result(stored: dict[str, Any] | None, offered: dict[str, Any]) -> bool:
    """Results compare by canonical JSON, so key order never turns a duplicate stale."""
    return stored is not None and canonical_json(stored) == canonical_json(offered)


def canonical_json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def completion(
    run_id: int,
    *,
    status: Status,
    current_run_id: int | None,
    completed_run_id: int | None,
    latest_ended_run_id: int | None,
    result_matches: bool,
) -> CompleteOutcome:
    """What ``complete(run_id)`` does to a task in this state (docs/ARCHITECTURE.md §5).

    A replay is allowed only while nothing newer has happened to the task: it went
    back to ready/blocked and this run is still the last one that ended.
    """
    if status is Status.RUNNING and current_run_id == run_id:
        return CompleteOutcome.COMPLETED
    if status is Status.DONE and completed_run_id == run_id:
        return CompleteOutcome.DUPLICATE if result_matches else CompleteOutcome.STALE
    if status in (Status.READY, Status.BLOCKED) and latest_ended_run_id == run_id:
        return CompleteOutcome.REPLAYED
    return CompleteOutcome.STALE


def check_reclaim_outcome(outcome: Outcome) -> Outcome:
    if outcome not in RECLAIM_OUTCOMES:
        raise UsageError(
            f"a reclaim ends its run as one of {sorted(RECLAIM_OUTCOMES)}, not {outcome!r}"
        )
    return outcome


MAX_RETRIES = 1000


def failure_limit_of(max_retries: int | None, failure_limit: int) -> int:
    """Counted failures a task may have before it is blocked: the task's own ``max_retries``
    (retries after the first failure, so one more failure) overrides ``failure_limit``."""
    return failure_limit if max_retries is None else max_retries + 1


def gives_up(failure_count: int, failure_limit: int) -> bool:
    """True when a task that has now failed ``failure_count`` times must stop retrying."""
    return failure_count >= failure_limit


def cooldown(waits: int, base: float = 60.0, cap: float = 3600.0) -> float:
    """Seconds before retrying after the ``waits``-th capacity wait in a row (1, 2, ...).

    Exponential so an exhausted provider is not hammered, capped so a task is never
    parked for longer than an operator would tolerate.
    """
    doublings = min(max(0, waits - 1), 64)  # past 64 the cap has long won; 2**n must stay a float
    return float(min(cap, base * 2**doublings))


def require_lease_ttl(lease_ttl: float) -> None:
    """A claim's lease must last: every backend refuses a ttl of zero or less (or NaN)."""
    if not lease_ttl > 0:
        raise UsageError(f"lease ttl must be more than 0 seconds, not {lease_ttl:g}")


def awaiting_run_approval(approval: str) -> str:
    """The SQL condition of a task that waits for approval before a run: its approval
    (``approval``: the expression of its own setting, else the configuration's for the
    board, ``:default_approval``) is ``before_run`` and nobody approved it as it stands.
    The claim passes over such a task (docs/approvals.md)."""
    return (
        f"(coalesce({approval}, :default_approval) = 'before_run' "
        "AND (decision IS NULL OR decision <> 'approved'))"
    )


def approval_of(task: Task, default: Approval) -> Approval:
    """What of ``task`` waits for a person: its own setting, else the configuration's
    for its board."""
    return task.settings.approval or Approval(default)


def awaiting_approval(task: Task, default: Approval) -> Approval | None:
    """What ``task`` waits for approval before, now; None: nothing (pure).

    A task ready or waiting for its parents waits before its run; a done one before its
    push (its follow-ups). A denied task waits for nothing: it is blocked, or its push
    is withheld.
    """
    if task.decision is not None:
        return None
    approval = approval_of(task, default)
    if approval is Approval.BEFORE_RUN and task.status in (Status.READY, Status.TODO):
        return approval
    if approval is Approval.BEFORE_PUSH and task.status is Status.DONE:
        return approval
    return None
