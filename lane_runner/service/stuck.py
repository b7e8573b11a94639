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
    signs: list[float] = [at for at in (run.get("last_event_at"), run.get("busy_at")) if at]
    limit: float = run.get("stall_limit") or stall_timeout
    clock = "tool_stall_timeout" if run.get("clock") == "tool" else "stall_timeout"
    if signs and not run.get("waiting_for") and now - max(signs) >= fraction * limit:
        last_event: float | None = run.get("last_event_at")
        quiet = f"{now - last_event:.0f} s" if last_event is not None else "a while"
        found.append(
            Warning(
                QUIET,
                f"no meaningful event for {quiet} "
                f"({clock} {limit:.0f} s ends the attempt)",
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
