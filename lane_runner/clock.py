"""The node's wall clock, which tests may skew and move.

Two test-only settings, both unset outside tests (the clock is then ``time.time``):

- ``LANE_RUNNER_SIM_CLOCK_OFFSET`` seconds, fixed at start: one runner's clock minutes
  off, so a test can show that a shared PostgreSQL board never relies on a node's
  clock (lease stamps and expiry come from the database);
- ``LANE_RUNNER_SIM_CLOCK_FILE``, a file holding seconds added on top, read at every
  reading: a test moves a running daemon's clock past a usage limit's reset instead
  of sleeping until it.

The skew applies to every time the runner takes from its own clock for the board
(the embedded SQLite board's stamps) and for usage limits, budgets' days and the
usage ledger.
"""

from __future__ import annotations

import os
import time

OFFSET_VARIABLE = "LANE_RUNNER_SIM_CLOCK_OFFSET"
FILE_VARIABLE = "LANE_RUNNER_SIM_CLOCK_FILE"


def offset() -> float:
    """Seconds added to the node's clock; a value that is not a number is refused."""
    text = os.environ.get(OFFSET_VARIABLE, "").strip()
    if not text:
        return 0.0
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{OFFSET_VARIABLE} must be a number of seconds, not {text!r}") from None


def moved() -> float:
    """Seconds the test's clock file adds now (0 while it is absent or empty)."""
    name = os.environ.get(FILE_VARIABLE)
    if not name:
        return 0.0
    try:
        with open(name, encoding="utf-8") as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return 0.0
    return float(text) if text else 0.0


_OFFSET = offset()


def now() -> float:
    """The node's wall clock, skewed by the tests' offset and clock file."""
    return time.time() + _OFFSET + moved()
