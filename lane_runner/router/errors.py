"""The one error the router package raises for a route it cannot give."""

from __future__ import annotations

from lane_runner.errors import LaneRunnerError


class RoutingError(LaneRunnerError):
    """No trustworthy route: the router was unreachable, refused, or answered nonsense.

    ``transient`` is true when asking again later may well succeed (connection
    errors, timeouts, 5xx after the retries), so the executor can return the
    task to ``ready`` instead of blocking it as a capability problem.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
