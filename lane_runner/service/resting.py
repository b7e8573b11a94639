"""Boards left alone for a few seconds after they were unavailable (docs/ARCHITECTURE.md §6).

A board that stays locked or unreachable for a whole wait budget (board/retry.py)
would cost the daemon's loop that budget on every claim, rescue and replay that
touches it. Instead the first failure rests the board: for ``period`` seconds
every use of it fails at once with ``BoardUnavailable`` (the callers already
handle that: skip the board, keep the result pending), and the other boards are
served as usual. Safe from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lane_runner.board.base import BoardUnavailable

log = logging.getLogger(__name__)

REST = 5.0  # seconds


class Resting:
    def __init__(self, period: float = REST, clock: Callable[[], float] = time.monotonic) -> None:
        self._period = period
        self._clock = clock
        self._until: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def remaining(self, slug: str) -> float:
        """Seconds ``slug`` still rests (0: it may be used)."""
        with self._lock:
            until, _ = self._until.get(slug, (0.0, ""))
        return max(0.0, until - self._clock())

    def rest(self, slug: str, error: BoardUnavailable) -> None:
        with self._lock:
            fresh = self._until.get(slug, (0.0, ""))[0] <= self._clock()
            self._until[slug] = (self._clock() + self._period, str(error))
        if fresh:
            log.warning(
                "%s; leaving board %s alone for %.0f s, the other boards keep working",
                error, slug, self._period,
            )

    @contextmanager
    def use(self, slug: str) -> Iterator[None]:
        """Run the block against ``slug`` unless it rests; an unavailable board starts resting.

        Raises BoardUnavailable at once while the board rests, and re-raises the one
        that made it rest.
        """
        left = self.remaining(slug)
        if left > 0:
            with self._lock:
                why = self._until[slug][1]
            raise BoardUnavailable(f"board {slug!r} rests for {left:.1f} s more after: {why}")
        try:
            yield
        except BoardUnavailable as error:
            self.rest(slug, error)
            raise
