"""Stuck-run warnings: a run nearing its stall or runtime limit, noticed before the limit acts.

The supervisor kills a run that was quiet for ``stall_timeout`` or ran past its
``max_runtime``. An operator wants to know earlier, while there is time to look:
at ``stuck_warning_fraction`` of either limit the run is flagged in ``status`` and
metrics, and the daemon leaves one comment per run and kind on the task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

QUIET = "quiet"
LONG = "long"
KINDS = (QUIET, LONG)


@dataclass(frozen=True)
class Warning:
    kind: str
    message: str


def assess(
    run: dict[str, Any], now: float, *, stall_timeout: float, max_runtime: float, fraction: float
) -> list[Warning]:
    """The warnings one active run (an ``Activity`` snapshot entry) deserves now (pure)."""
    if fraction <= 0:
        return []
    found = []
    last_event: float | None = run.get("last_event_at")
    quiet = not run.get("waiting_for")
    if quiet and last_event is not None and now - last_event >= fraction * stall_timeout:
        found.append(
            Warning(
                QUIET,
                f"no meaningful event for {now - last_event:.0f} s "
                f"(stall_timeout {stall_timeout:.0f} s ends the attempt)",
            )
        )
    runtime = now - run["started_at"]
    if runtime >= fraction * max_runtime:
        found.append(
            Warning(
                LONG,
                f"running for {runtime:.0f} s of its {max_runtime:.0f} s maximum runtime",
            )
        )
    return found
