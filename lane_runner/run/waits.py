"""How long a run that ends without a result keeps its task waiting, and what the board
is told (pure: ``run/endings.py`` carries these out).

Three waits: a counted failure's backoff (doubling with the task's failures), a
cooldown (uncounted, doubling with the cooldowns in a row, blocked at
``cooldown_limit`` by ``cycling``), and a park until a usage limit resets (neither a
failure nor a cooldown).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lane_runner.board import rules
from lane_runner.providers.model import Classification
from lane_runner.run import cycling
from lane_runner.run.decide import Decision


def backoff(
    failures: int, max_retries: int | None, failure_limit: int, base: float, cap: float
) -> float | None:
    """Seconds before the task may be claimed again after one more counted failure (it
    has ``failures`` already): doubling with its failures, capped (``failure_backoff_base``,
    ``failure_backoff_max``). A task that fails at once must not spend its whole budget in
    seconds, before anything that broke around it (a tool, a credential, a network) could
    come back. None: no backoff configured, or this failure gives up (no next attempt)."""
    if not base:
        return None
    after = failures + 1
    if rules.gives_up(after, rules.failure_limit_of(max_retries, failure_limit)):
        return None
    return rules.cooldown(after, base, cap)


def waiting(reason: str, wait: float | None) -> str:
    """``reason`` with when the next attempt comes, when it waits."""
    return reason if not wait else f"{reason} (next attempt in {wait:.0f} s)"


@dataclass(frozen=True)
class Retry:
    """A failure that sends the task back to ready."""

    reason: str  # what the board is told, with the wait
    wait: float | None  # seconds before it may be claimed again (None: at once, or never)
    filed: bool  # filed with the storm breaker against the provider


def retry(decision: Decision, classification: Classification, backoff: float | None) -> Retry:
    """Carry ``decide``'s RETRY: a counted failure waits its ``backoff`` and is filed with
    the storm breaker, unless the run ran out of time (a long task, not a broken provider)."""
    wait = backoff if decision.count_failure else None
    filed = decision.count_failure and classification is not Classification.TIMED_OUT
    return Retry(waiting(decision.reason, wait), wait, filed)


@dataclass(frozen=True)
class Cooldown:
    """A cooldown of the task, or the block that ends its cycling."""

    block: cycling.Verdict  # ``block.block``: cooled down too often in a row, blocked
    seconds: float  # the wait, doubling with each cooldown in a row whatever its cause
    reason: str  # the run's reason, with the wait
    board_reason: str  # the board's: why it waits (capacity, router unreachable)
    tells_next_run: bool  # a stall: the next run is told, a command it ran may hang


def cooldown(
    cause: str, reason: str, in_a_row: int, cycles: Sequence[dict[str, Any]], limit: int,
    base: float, cap: float,
) -> Cooldown:
    """The ``in_a_row``-th cooldown in a row (``cycles``: the latest, this one included)."""
    seconds = rules.cooldown(in_a_row, base, cap)
    return Cooldown(
        cycling.after_cooldown(in_a_row, cycles, limit),
        seconds,
        f"{reason} (next attempt in {seconds:.0f} s)",
        f"{cause}: {reason}",
        cause == Classification.STALLED.value,
    )


def park(until: float, now: float) -> float:
    """Seconds until a usage limit's reset (none when it is past)."""
    return max(0.0, until - now)
