"""What to do after one provider attempt: the executor's pure decision table.

Kept apart from the effects (subprocesses, board writes, journal) so every row
of the table is tested cheaply; the executor only carries decisions out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, assert_never

from lane_runner.board.model import BlockKind, Outcome
from lane_runner.providers.model import Classification
from lane_runner.providers.usage import LimitNotice
from lane_runner.router.errors import Cause, RoutingError
from lane_runner.router.health import FailureKind


class Step(StrEnum):
    ACCEPT = "accept"  # write the pending record and finalize
    CONTINUE = "continue"  # another goal turn in the same session, with feedback
    FALLBACK = "fallback"  # route to the other provider with a handoff
    COOLDOWN = "cooldown"  # every provider is out: back to ready after a cooldown
    BLOCK = "block"  # a person must look: blocked with a kind
    RETRY = "retry"  # a failure: back to ready (counted; the board gives up at the limit)
    ABANDON = "abandon"  # the run is not ours to finish (lease lost, shutting down)


#: Steps that move away from a provider without capacity: when every provider is under
#: a usage limit with a known reset, the run waits for the reset instead.
WAITS_FOR_CAPACITY = frozenset({Step.FALLBACK, Step.COOLDOWN})


@dataclass(frozen=True)
class Decision:
    step: Step
    reason: str
    kind: BlockKind | None = None
    outcome: Outcome | None = None
    count_failure: bool = False


def after_attempt(
    classification: Classification,
    reason: str,
    result: dict[str, Any] | None,
    *,
    accepted: bool,
    verdict_reason: str,
    turn: int,
    goal_turns: int,
    time_left: bool,
    fell_back: bool,
) -> Decision:
    """Decide the next step from one attempt's classification, result and judgement.

    ``accepted``/``verdict_reason`` are the judge's view of a completed result
    (ignored otherwise); ``turn`` counts from 1; ``time_left`` says whether more than
    the goal margin of the run's runtime remains. The match is exhaustive: a new
    classification is a type error here until someone decides what it means.
    """
    match classification:
        case Classification.LEASE_LOST | Classification.CANCELLED:
            return Decision(Step.ABANDON, reason)
        case Classification.UNUSABLE:
            if not fell_back:
                return Decision(Step.FALLBACK, reason)
            return Decision(Step.BLOCK, reason, kind=BlockKind.CAPABILITY)
        case (
            Classification.CAPACITY
            | Classification.AUTH
            | Classification.STALLED
            | Classification.MISCONFIGURED
        ):
            # Not the task's fault: another provider, or a wait, without spending its budget.
            if not fell_back:
                return Decision(Step.FALLBACK, reason)
            return Decision(
                Step.COOLDOWN, f"every provider is unavailable: {reason}", outcome=Outcome.RECLAIMED
            )
        case Classification.REFUSED:
            why = f"the model API refused the task: {reason}"
            return Decision(Step.BLOCK, why, kind=BlockKind.CAPABILITY)
        case Classification.TIMED_OUT:
            return Decision(Step.RETRY, reason, outcome=Outcome.TIMED_OUT, count_failure=True)
        case (
            Classification.SESSION_MISSING
            | Classification.SESSION_COLLISION
            | Classification.KILLED_BY_SIGNAL
            | Classification.FAILED
        ):
            return Decision(Step.RETRY, reason, outcome=Outcome.FAILED, count_failure=True)
        case Classification.OK:
            if result is None:
                why = "the provider ended without a structured result"
                return Decision(Step.RETRY, why, outcome=Outcome.FAILED, count_failure=True)
            turns_left = turn < goal_turns
            return _judge_result(result, accepted, verdict_reason, turns_left, time_left, turn)
        case unreachable:
            assert_never(unreachable)


def after_broken(reason: str, *, fell_back: bool) -> Decision:
    """The route's provider is marked broken by the storm breaker (``service/breaker.py``):
    the other provider, once; then a wait, uncounted. The task did nothing wrong, and
    spending its failure budget on a provider known to fail is what the breaker prevents."""
    if not fell_back:
        return Decision(Step.FALLBACK, reason)
    return Decision(
        Step.COOLDOWN, f"every provider is unavailable: {reason}", outcome=Outcome.RECLAIMED
    )


def after_routing_error(error: RoutingError) -> Decision:
    """No route: wait for a router that may come back, or block with the router's words.

    A transient cause (unreachable, timeout, 408/429/5xx) is not the task's fault, so
    the task cools down uncounted. A permanent one (a 4xx, a garbage or unsafe
    selection, a manual lane answered with another provider, a static policy with no
    model for the effort) would fail the same way on every try: the task is blocked
    as ``capability`` so a person sees it, instead of cycling unseen. A call cut
    short by shutdown leaves the run to the next start.
    """
    reason = f"routing failed ({error.cause.value}): {error}"
    if error.cause is Cause.CANCELLED:
        return Decision(Step.ABANDON, reason)
    if error.transient:
        return Decision(Step.COOLDOWN, reason, outcome=Outcome.RECLAIMED)
    return Decision(Step.BLOCK, reason, kind=BlockKind.CAPABILITY)


def _judge_result(
    result: dict[str, Any],
    accepted: bool,
    verdict_reason: str,
    turns_left: bool,
    time_left: bool,
    turn: int,
) -> Decision:
    status = result["status"]
    summary = result["summary"].strip() or "(no summary)"
    if status == "blocked":
        blockers = "; ".join(result["blockers"]) or summary
        return Decision(Step.BLOCK, f"worker is blocked: {blockers}", kind=BlockKind.NEEDS_INPUT)
    if status == "completed" and accepted:
        return Decision(Step.ACCEPT, summary)
    why = (
        verdict_reason
        if status == "completed"
        else f"the worker reported incomplete work: {summary}"
    )
    if turns_left and time_left:
        return Decision(Step.CONTINUE, why)
    stop = "" if time_left else ", with too little runtime left for another turn"
    return Decision(
        Step.BLOCK, f"not done after {turn} turn(s){stop}: {why}", kind=BlockKind.NEEDS_INPUT
    )


def waits_for_capacity(step: Step) -> bool:
    """Whether ``step`` is one a usage limit with a known reset turns into a wait for it."""
    return step in WAITS_FOR_CAPACITY


class Said(StrEnum):
    """What an attempt says of its provider, for provider health (``router/health.py``)."""

    LIMIT = "limit"  # a usage limit whose reset is still ahead: avoided until then, commented
    FAILURE = "failure"  # capacity, auth or misconfigured: avoided while the failure is fresh
    SUCCESS = "success"  # it answered: usable, and the storm breaker's provider scope recovers


@dataclass(frozen=True)
class HealthNote:
    said: Said
    words: str = ""  # LIMIT: the CLI's words; FAILURE: the attempt's reason
    kind: FailureKind = "capacity"  # FAILURE: what it is recorded as
    resets_at: float = 0.0  # LIMIT: when the CLI said the limit resets


def health_after(
    classification: Classification, reason: str, limit: LimitNotice | None, now: float
) -> HealthNote | None:
    """What one attempt's ending says of its provider's health; None: nothing (a task's
    own failure, a stall, a timeout say nothing of the provider). A capacity failure
    whose CLI named a reset still ahead is a limit until then, not a plain failure."""
    match classification:
        case Classification.CAPACITY if (
            limit is not None and limit.resets_at is not None and limit.resets_at > now
        ):
            return HealthNote(Said.LIMIT, limit.words, resets_at=limit.resets_at)
        case Classification.OK:
            return HealthNote(Said.SUCCESS)
        case _ if classification in _FAILURES:
            return HealthNote(Said.FAILURE, reason, kind=_FAILURES[classification])
        case _:
            return None


_FAILURES: dict[Classification, FailureKind] = {
    Classification.CAPACITY: "capacity",
    Classification.AUTH: "auth",
    Classification.MISCONFIGURED: "misconfigured",
}
