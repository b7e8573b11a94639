"""Stuck-run warnings: a run nearing its stall or runtime limit, noticed before the limit acts.

The supervisor kills a run that was quiet for ``stall_timeout`` or ran past its
``max_runtime``. An operator wants to know earlier, while there is time to look:
at ``stuck_warning_fraction`` of either limit the run is flagged in ``status`` and
metrics, and the daemon leaves one comment per run and kind on the task.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from lane_runner.board.base import BoardUnavailable
from lane_runner.service import logs, metrics
from lane_runner.service.activity import ActiveRun, RunWarning
from lane_runner.service.services import Services

log = logging.getLogger(__name__)

QUIET = "quiet"
LONG = "long"
KINDS = (QUIET, LONG)


def assess(
    run: ActiveRun, now: float, *, stall_timeout: float, max_runtime: float, fraction: float
) -> list[RunWarning]:
    """The warnings one active run (an ``Activity`` snapshot entry) deserves now (pure)."""
    if fraction <= 0:
        return []
    found = []
    quiet = _quiet(run, now, stall_timeout=stall_timeout, fraction=fraction)
    if quiet is not None:
        found.append(quiet)
    runtime = now - run.started_at
    if runtime >= fraction * max_runtime:
        found.append(
            RunWarning(
                LONG,
                f"running for {runtime:.0f} s of its {max_runtime:.0f} s maximum runtime",
            )
        )
    return found


def _quiet(
    run: ActiveRun, now: float, *, stall_timeout: float, fraction: float
) -> RunWarning | None:
    """The warning of a run quiet for ``fraction`` of its stall clock's limit (never one
    waiting for a provider slot), or None."""
    signs: list[float] = [at for at in (run.last_event_at, run.busy_at) if at]
    limit: float = run.stall_limit or stall_timeout
    if not signs or run.waiting_for or now - max(signs) < fraction * limit:
        return None
    clock = "tool_stall_timeout" if run.clock == "tool" else "stall_timeout"
    last_event = run.last_event_at
    quiet = f"{now - last_event:.0f} s" if last_event is not None else "a while"
    return RunWarning(
        QUIET, f"no meaningful event for {quiet} ({clock} {limit:.0f} s ends the attempt)"
    )


@dataclass
class Watch:
    """The daemon's watch over its runs: each turn flags the runs near a limit in the
    activity (``status``) and comments once per run and kind on the task."""

    warned: dict[int, set[str]] = field(default_factory=dict)
    """The kinds commented, per run."""

    def turn(self, services: Services, now: float) -> dict[str, int]:
        """Flag and comment; how many runs each kind of warning holds now."""
        cfg = services.cfg
        counts = dict.fromkeys(KINDS, 0)
        for run in services.activity.snapshot():
            found = assess(
                run,
                now,
                stall_timeout=cfg.stall_timeout,
                max_runtime=run.max_runtime or cfg.max_runtime,
                fraction=cfg.stuck_warning_fraction,
            )
            services.activity.update(run.run_id, warnings=found)
            warned = self.warned.setdefault(run.run_id, set())
            for warning in found:
                counts[warning.kind] += 1
                if warning.kind not in warned and _comment(services, run, warning):
                    warned.add(warning.kind)
        return counts

    def forget(self, run_id: int) -> None:
        """A run ended: its warnings go with it."""
        self.warned.pop(run_id, None)


def _comment(services: Services, run: ActiveRun, warning: RunWarning) -> bool:
    """One comment on the task; False when the board cannot take it now (tried again)."""
    log.warning(
        "run %s of %s/%s looks stuck: %s",
        run.run_id,
        run.board,
        run.task_id,
        warning.message,
        extra=logs.about(run.board, run.task_id, run.run_id),
    )
    try:
        with services.resting.use(run.board):
            services.store.board(run.board).comment(
                run.task_id, f"warning: run {run.run_id} {warning.message}", "lane-runner"
            )
    except BoardUnavailable as error:
        log.warning("stuck warning for run %s not commented yet: %s", run.run_id, error)
        return False
    metrics.STUCK_WARNINGS.labels(warning.kind).inc()
    return True
