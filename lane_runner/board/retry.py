"""Bounded waits on board storage: one retry layer with one total budget per operation.

A board that is locked (another process holds SQLite's write lock, a PostgreSQL
row lock is held) or briefly unable to serialise a transaction is retried here,
with a short backoff, until the operation's budget is spent; then the caller gets
``BoardUnavailable`` and decides (the daemon rests that board for a few seconds;
the journal keeps the result pending). The budget covers every wait of an
operation: each attempt is told how much remains and bounds its own blocking
calls (SQLite's busy timeout, PostgreSQL's lock timeout, the pool) by it.

The budget stays below the heartbeat interval (``budget_for``), so a board that
never lets go costs a lease renewal at most one budget, never a lease.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_BUDGET = 2.0  # seconds; the most one board operation waits in total
BACKOFF = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # then 0.2 s between attempts


def budget_for(heartbeat_interval: float) -> float:
    """The wait budget for a runner heartbeating every ``heartbeat_interval`` seconds."""
    return min(DEFAULT_BUDGET, heartbeat_interval / 2)


def bounded(
    attempt: Callable[[float], T],
    *,
    transient: Callable[[Exception], bool],
    budget: float,
    what: str,
) -> T:
    """``attempt(remaining)`` until it returns, raises a non-transient error, or time is up.

    ``attempt`` must be safe to repeat (a rolled-back transaction is). The last
    transient error propagates once less than the next backoff step remains.
    """
    deadline = time.monotonic() + budget
    tries = 0
    while True:
        try:
            return attempt(max(0.0, deadline - time.monotonic()))
        except Exception as error:
            if not transient(error):
                raise
            delay = BACKOFF[min(tries, len(BACKOFF) - 1)]
            if deadline - time.monotonic() <= delay:
                raise
            log.debug("%s busy (%s); retrying in %.3fs", what, error, delay)
        tries += 1
        time.sleep(delay)
