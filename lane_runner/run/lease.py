"""The run's lease on its task (docs/ARCHITECTURE.md §1): renewed by heartbeats while
the run works, which also say it is alive, look for an operator's stop and share the
usage ledger; and the run's ending tried until the board takes it, for as long as the
lease holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import StopRequest
from lane_runner.run.claimed import Claimed
from lane_runner.run.notebook import Notebook
from lane_runner.run.spending import Spending

log = logging.getLogger(__name__)
T = TypeVar("T")
#: The least wait between two tries of a run's ending on an unavailable board; the
#: board's rest (``service/resting.py``) usually sets a longer one.
RETRY_PAUSE = 0.5


class Lease:
    def __init__(self, claimed: Claimed, notebook: Notebook, spending: Spending) -> None:
        self.c, self.notebook, self.spending = claimed, notebook, spending
        run = claimed.run
        # When the lease runs out, on this node's monotonic clock: the board's stamps are
        # the board's clock (the database's, on PostgreSQL), which this node's may not match.
        self.until = time.monotonic() + run.lease_expires_at - run.claimed_at
        self.noted_at = claimed.started  # the latest progress note (progress_note_interval)
        self.stop: StopRequest | None = None  # the operator's stop, once a heartbeat saw it

    def heartbeat(self) -> bool:
        """Renew the lease, say the run is alive, look for an operator's stop, and share the
        usage ledger with the board (other runners' spend counts towards the budgets)."""
        renewed = self.renew()
        if renewed:
            self._progress_note()
            self._look_for_stop()
            self.spending.share()
        return renewed

    def renew(self) -> bool:
        """Renew the lease; storage trouble keeps the worker until the lease is really gone."""
        c = self.c
        sent = time.monotonic()  # the board stamps the lease after this: never overestimated
        try:
            renewed = c.board.heartbeat(c.run.id, c.settings.heartbeats.lease_ttl)
        except BoardUnavailable as error:
            log.warning(
                "heartbeat for run %s not stored (%s); %.1f s of its lease known left",
                c.run.id,
                error,
                self.until - sent,
            )
            return sent < self.until
        if renewed:
            self.until = sent + c.settings.heartbeats.lease_ttl
            c.s.activity.heartbeat(c.run.id)
        return renewed

    def _progress_note(self) -> None:
        """Every ``progress_note_interval`` of a long attempt, a comment says it is alive,
        so a person reading the board sees work going on, not silence."""
        c = self.c
        interval = c.settings.heartbeats.progress_note_interval
        now = time.monotonic()
        if not interval or now - self.noted_at < interval:
            return
        self.noted_at = now
        route = c.state.route or {}
        self.notebook.note(
            f"still working: {route.get('provider')}/{route.get('model')} at "
            f"{route.get('effort')} effort{c.goal_words(c.state.goal_turn)}, "
            f"{now - c.started:.0f} s into the run"
        )

    def _look_for_stop(self) -> None:
        """An operator's ``task stop`` is stored on the board; each heartbeat looks for it,
        so it works from any shell and any node. Seen: the process tree is ended."""
        if self.stop is not None:
            return
        c = self.c
        try:
            self.stop = c.board.stop_request(c.run.id)
        except BoardUnavailable as error:
            log.debug("stop request of run %s not readable now: %s", c.run.id, error)
            return
        if self.stop is not None:
            log.info("run %s: stop requested: %s", c.run.id, self.stop.reason)
            c.cancel.set()

    def until_landed(self, what: str, step: Callable[[], T]) -> T | None:
        """The run's ending (a completion, block or reclaim), tried until the board takes it.

        Giving up at the first unavailable board would leave the run ``running`` with no
        slot behind it until its lease ran out (30 min by default). So the slot is kept
        and the step tried again whenever the board's rest allows (``service/resting.py``),
        the lease renewed meanwhile, until it lands. None when it did not: the lease is
        really lost (the lease's rescue settles the run) or the runner is stopping after
        its grace (the next start reclaims the run; a result stays in the journal).
        ``step`` raises BoardUnavailable while the board would not take it.
        """
        renewed = time.monotonic()
        waiting = False
        while True:
            try:
                return step()
            except BoardUnavailable as error:
                if not waiting:
                    waiting = True
                    self._waits_for_board(what, error)
            now = time.monotonic()
            if now - renewed >= self.c.settings.heartbeats.interval:
                renewed = now
                lease_held = self.renew()
            else:
                lease_held = now < self.until
            if not lease_held:
                log.warning("run %s lost its lease; its %s is left to a rescue", self.c.run.id,
                            what)
                return None
            if self._pause(what):
                return None

    def _waits_for_board(self, what: str, error: BoardUnavailable) -> None:
        c, slug = self.c, self.c.task.board
        log.warning(
            "board %s unavailable for the %s of run %s (%s); tried again while its lease holds",
            slug, what, c.run.id, error,
        )
        c.s.activity.update(c.run.id, ending=f"{what} waits for board {slug}")

    def _pause(self, what: str) -> bool:
        """Wait before the next try, as the board's rest says; True: the runner is stopping."""
        s = self.c.s
        pause = max(s.resting.remaining(self.c.task.board), RETRY_PAUSE)
        if s.cancel.wait(min(pause, self.c.settings.heartbeats.interval)):
            log.info("stopping: the %s of run %s waits for the next start", what, self.c.run.id)
            return True
        return False
