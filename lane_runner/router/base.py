"""The router interface the executor uses, and the fallback every router shares."""

from __future__ import annotations

import time
from typing import Protocol

from lane_runner.router.route import Route, lane_assignee, other_provider, rerouted


class Router(Protocol):
    """Chooses provider, model and effort at every worker boundary.

    ``route`` never returns the excluded provider: the caller decides when a
    provider is excluded (fresh health, docs/ARCHITECTURE.md §3.5), the router only obeys.
    """

    def route(
        self,
        context: str,
        assignee: str,
        exclude: str | None = None,
        exclude_reason: str | None = None,
    ) -> Route: ...

    def fallback(self, context: str, failed: Route, reason: str) -> Route: ...

    def close(self) -> None: ...

    @property
    def usable(self) -> tuple[str, ...]:
        """The providers whose CLI this runner has: the ones a fallback goes to."""
        ...


def fallback_route(router: Router, context: str, failed: Route, reason: str) -> Route:
    """After a capacity or auth failure: the other provider at the same effort, saying why.

    The effort is kept because it was chosen for the task, not for the provider
    that failed; the failed provider is excluded so the router is told as well.
    """
    started = time.monotonic()
    provider = other_provider(failed.provider, router.usable)
    replacement = router.route(
        context,
        lane_assignee(provider, failed.effort),
        exclude=failed.provider,
        exclude_reason=reason,
    )
    return rerouted(
        replacement,
        classifier=f"{replacement.classifier}-fallback",
        why=f"{failed.provider} {reason}; fell back to {provider} at {failed.effort} effort",
        latency_ms=int((time.monotonic() - started) * 1000),
    )
