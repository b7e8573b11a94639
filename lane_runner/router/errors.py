"""The one error the router package raises for a route or verdict it cannot give."""

from __future__ import annotations

from enum import StrEnum

from lane_runner.errors import LaneRunnerError


class Cause(StrEnum):
    """Why routing failed; the executor's decision reads ``transient``, people read this."""

    UNREACHABLE = "unreachable"  # connect, read or write error, protocol break
    TIMEOUT = "timeout"  # one request or the whole call's deadline ran out
    BUSY = "busy"  # 408, 429, 5xx after the retries
    CLOSED = "closed"  # the router was replaced by a reload mid-call
    CANCELLED = "cancelled"  # the daemon is shutting down
    REFUSED = "refused"  # a 4xx other than 408/429
    BAD_URL = "bad-url"  # router_url cannot be requested
    BAD_RESPONSE = "bad-response"  # undecodable, oversized or not what the contract says
    BAD_SELECTION = "bad-selection"  # a selection that is malformed, unsupported or unsafe
    WRONG_LANE = "wrong-lane"  # a manual lane answered with another provider or effort
    NO_MODEL = "no-model"  # the static policy has no model for an effort


#: Asking again later may well succeed; every other cause needs a person.
TRANSIENT_CAUSES = frozenset(
    {Cause.UNREACHABLE, Cause.TIMEOUT, Cause.BUSY, Cause.CLOSED, Cause.CANCELLED}
)


class RoutingError(LaneRunnerError):
    """No trustworthy route: the router was unreachable, refused, or answered nonsense.

    ``transient`` follows from the cause: when asking again later may well succeed
    the executor cools the task down; otherwise it blocks it as a capability problem
    with the router's words, instead of asking the same question forever.
    """

    def __init__(self, message: str, cause: Cause) -> None:
        super().__init__(message)
        self.cause = cause

    @property
    def transient(self) -> bool:
        return self.cause in TRANSIENT_CAUSES
