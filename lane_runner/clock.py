"""The node's wall clock, which tests may skew (``LANE_RUNNER_SIM_CLOCK_OFFSET`` seconds).

The offset exists for tests only: it lets one runner's clock be minutes off, so a
test can show that a shared PostgreSQL board never relies on a node's clock
(lease stamps and expiry come from the database). It is applied to every time
the runner takes from its own clock for the board: the embedded SQLite board's
stamps. Unset (always, outside tests) it is zero.
"""

from __future__ import annotations

import os
import time

OFFSET_VARIABLE = "LANE_RUNNER_SIM_CLOCK_OFFSET"


def offset() -> float:
    """Seconds added to the node's clock; a value that is not a number is refused."""
    text = os.environ.get(OFFSET_VARIABLE, "").strip()
    if not text:
        return 0.0
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{OFFSET_VARIABLE} must be a number of seconds, not {text!r}") from None


_OFFSET = offset()


def now() -> float:
    """The node's wall clock, skewed by the test offset."""
    return time.time() + _OFFSET
