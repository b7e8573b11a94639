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
from lane_runner.run import pin, plan
from lane_runner.run.claimed import Claimed
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.service import breaker, metrics


class Routing:
    def __init__(self, claimed: Claimed, notebook: Notebook, lease: Lease) -> None:
        self.c, self.notebook, self.lease = claimed, notebook, lease
        self.fell_back = False  # the run went to the other provider once already
        self.held: str | None = None  # the provider whose slot this run holds
        self.said: set[str] = set()  # what the run's comments said of the task's pin
        self.beat_at = 0.0  # the lease's latest renewal while waiting for a slot

    def route(self, task_context: str) -> Route:
        lane = self.c.task.assignee or AUTO_ASSIGNEE
        avoid = plan.exclusion(self.c.s.home, lane, clock.now())
        return self._record(plan.ask_route(self.c.tools.router, task_context, lane, avoid))

    def fallback(self, task_context: str, failed: Route, reason: str) -> Route:
        self.fell_back = True
        metrics.FALLBACKS.labels(failed.provider).inc()
        return self._record(self.c.tools.router.fallback(task_context, failed, reason))

    def admit(self, task_context: str, route: Route) -> Route | None:
        """Hold a slot of the route's provider (``service/slots.py``) before any attempt.

        A provider at its cap means waiting for its slot, renewing the lease meanwhile,
        or, with ``provider_full = "fallback"``, one fallback to the other provider
        (whose slot is then waited for). None: the lease was lost or the runner is
        stopping while waiting; the run is not ours to go on with.
        """
        c, wait = self.c, self.c.settings.slot_wait
        self.beat_at = time.monotonic()
        while not c.s.slots.acquire(route.provider):
            if wait.fallback and not self.fell_back:
                route = self.fallback(
                    task_context, route, f"{route.provider} is at max_running_{route.provider}"
                )
                continue
            if not self._waited(route.provider):
                return None
        self._holds(route.provider)
        return route

    def move_to(self, provider: str) -> bool:
        """The run's slot moved to ``provider``'s (its reviewer's, then back to its
        implementer's): the held one released before the wait, so two runs each holding
        the provider the other waits for never wait on each other. False: the lease was
        lost or the runner is stopping while waiting; the run holds no slot then."""
        if self.held == provider:
            return True
        self.release()
        self.beat_at = time.monotonic()
        while not self.c.s.slots.acquire(provider):
            if not self._waited(provider):
                return False
        self._holds(provider)
        return True

    def _waited(self, provider: str) -> bool:
        """One wait for ``provider``'s slot, said once, the lease renewed every beat;
        False: the lease was lost or the runner is stopping."""
        c, wait = self.c, self.c.settings.slot_wait
        if c.s.activity.waiting(c.run.id) != provider:
            c.s.activity.update(c.run.id, waiting_for=provider)
            self.notebook.note(f"waiting for a {provider} slot (max_running_{provider})")
        c.s.slots.wait(min(wait.beat, 1.0))
        if c.cancel.is_set():
            return False
        if time.monotonic() - self.beat_at >= wait.beat:
            self.beat_at = time.monotonic()
            return self.lease.heartbeat()
        return True

    def _holds(self, provider: str) -> None:
        self.held = provider
        self.c.s.activity.update(self.c.run.id, waiting_for=None)

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

    def _record(self, routed: Route) -> Route:
        """The route with the task's own model pinned (``run/pin.py``), kept and commented;
        what the pin did is said once per run."""
        pinned = pin.pin(routed, pin.asked_of(self.c.task))
        route = pinned.route
        self.c.state.route = route.to_dict()  # saved with the attempt that follows
        self.notebook.note(route.describe())
        for said in pinned.said:
            if said not in self.said:
                self.said.add(said)
                self.notebook.note(said)
        return route
