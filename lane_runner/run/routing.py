"""Which provider and model the run's next attempt goes to (docs/ARCHITECTURE.md §1):
the route asked of the router (``plan``, shared with the dry run), the one fallback to
the other provider, the provider's slot held before any attempt (``service/slots.py``),
and the storm breaker's word on the provider.
"""

from __future__ import annotations

import time

from lane_runner import clock
from lane_runner.names import AUTO_ASSIGNEE
from lane_runner.router import Route
from lane_runner.run import plan
from lane_runner.run.claimed import Claimed
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.service import breaker, metrics


class Routing:
    def __init__(self, claimed: Claimed, notebook: Notebook, lease: Lease) -> None:
        self.c, self.notebook, self.lease = claimed, notebook, lease
        self.fell_back = False  # the run went to the other provider once already
        self.held: str | None = None  # the provider whose slot this run holds

    def route(self, task_context: str) -> Route:
        lane = self.c.task.assignee or AUTO_ASSIGNEE
        avoid = plan.exclusion(self.c.s.home, lane, clock.now())
        route = plan.ask_route(self.c.s.router, task_context, lane, avoid)
        self._record(route)
        return route

    def fallback(self, task_context: str, failed: Route, reason: str) -> Route:
        self.fell_back = True
        metrics.FALLBACKS.labels(failed.provider).inc()
        route = self.c.s.router.fallback(task_context, failed, reason)
        self._record(route)
        return route

    def admit(self, task_context: str, route: Route) -> Route | None:
        """Hold a slot of the route's provider (``service/slots.py``) before any attempt.

        A provider at its cap means waiting for its slot, renewing the lease meanwhile,
        or, with ``provider_full = "fallback"``, one fallback to the other provider
        (whose slot is then waited for). None: the lease was lost or the runner is
        stopping while waiting; the run is not ours to go on with.
        """
        c = self.c
        slots, cfg = c.s.slots, c.cfg
        beat = time.monotonic()
        while not slots.acquire(route.provider):
            if cfg.provider_full == "fallback" and not self.fell_back:
                route = self.fallback(
                    task_context, route, f"{route.provider} is at max_running_{route.provider}"
                )
                continue
            if c.s.activity.waiting(c.run.id) != route.provider:
                c.s.activity.update(c.run.id, waiting_for=route.provider)
                self.notebook.note(
                    f"waiting for a {route.provider} slot (max_running_{route.provider})"
                )
            slots.wait(min(cfg.heartbeat_interval, 1.0))
            if c.cancel.is_set():
                return None
            if time.monotonic() - beat >= cfg.heartbeat_interval:
                beat = time.monotonic()
                if not self.lease.heartbeat():
                    return None
        self.held = route.provider
        c.s.activity.update(c.run.id, waiting_for=None)
        return route

    def release(self) -> None:
        if self.held is not None:
            self.c.s.slots.release(self.held)
            self.held = None

    def broken(self, provider: str) -> str | None:
        """Why ``provider`` may not be used now (the storm breaker marks it broken and no
        probe is due), or None; a due probe is started here."""
        where = breaker.scope(breaker.PROVIDER, provider)
        if self.c.s.breaker.admits(where, time.time()):
            return None
        trip = self.c.s.breaker.trips().get(where)
        return trip.describe() if trip is not None else None

    def _record(self, route: Route) -> None:
        self.c.state.route = route.to_dict()  # saved with the attempt that follows
        self.notebook.note(route.describe())
