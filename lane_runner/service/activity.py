"""What the daemon is doing right now, for ``STATUS=`` and ``lane-runner status``.

Worker threads update their run's entry; the daemon loop reads a snapshot (copies of
the entries, ``ActiveRun``; ``status.json`` holds them as ``asdict`` writes them).
A plain dict under a lock: the writes are a few per second at most.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from lane_runner.providers import Progress


@dataclass(frozen=True)
class RunWarning:
    """A stuck-run warning in force (``service/stuck.py``): its kind and what it says."""

    kind: str
    message: str


@dataclass
class ActiveRun:
    """One running run as ``status`` shows it; the field names are ``status.json``'s."""

    board: str
    task_id: str
    run_id: int
    started_at: float = field(default_factory=time.time)
    provider: str | None = None
    model: str | None = None
    effort: str | None = None
    last_heartbeat_at: float | None = None
    last_event_at: float | None = None
    log_path: str | None = None
    pid: int | None = None
    max_runtime: float | None = None
    waiting_for: str | None = None
    """A provider at its cap whose slot this run waits for (``service/slots.py``)."""
    ending: str | None = None
    """The run's ending (its result, block or reclaim) waiting for an unavailable board."""
    warnings: list[RunWarning] = field(default_factory=list)
    """Stuck-run warnings in force (``service/stuck.py``)."""
    clock: str | None = None
    """The stall clock that runs (``stall``, or ``tool`` while a tool call is in flight)."""
    stall_limit: float | None = None
    """Its limit, in seconds."""
    busy_at: float | None = None
    """When the attempt's processes were last found using CPU (quiet but working)."""
    turn: int | None = None
    """The goal turn in progress (``run/goal.py``): the web console and ``--json`` show it."""
    session_id: str | None = None
    """The CLI's session, once it said it (what a resume continues)."""
    tokens: int = 0
    """Tokens this run's ledger records hold so far (this runner's own)."""
    cost_usd: float = 0.0
    """Their dollars, where priced."""
    role: str | None = None
    """``review`` while a reviewer's run of its own reviews this run's answer."""
    review_run: int | None = None
    """That review run's id (``run/reviewrun.py``)."""


class Activity:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, ActiveRun] = {}
        self._reviews: dict[int, int] = {}  # a review run's id -> the run it reviews

    def start(
        self, board: str, task_id: str, run_id: int, log_path: str, max_runtime: float
    ) -> None:
        with self._lock:
            self._runs[run_id] = ActiveRun(
                board, task_id, run_id, log_path=log_path, max_runtime=max_runtime
            )

    def finish(self, run_id: int) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def reviewing(self, run_id: int, review_run: int | None) -> None:
        """Run ``run_id``'s answer is reviewed by ``review_run`` (a run of its own, none
        once it ended): what the reviewer's attempt reports shows on ``run_id``'s entry,
        with the role ``review``, since the slot and the task are that run's."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None and run.review_run is not None:
                self._reviews.pop(run.review_run, None)
            if review_run is not None:
                self._reviews[review_run] = run_id
            if run is not None:
                run.role, run.review_run = ("review" if review_run else None), review_run

    def update(self, run_id: int, **fields: Any) -> None:
        with self._lock:
            run = self._runs.get(self._reviews.get(run_id, run_id))
            if run is not None:
                for name, value in fields.items():
                    setattr(run, name, value)

    def waiting(self, run_id: int) -> str | None:
        """The provider whose slot the run waits for, if any."""
        with self._lock:
            run = self._runs.get(run_id)
            return None if run is None else run.waiting_for

    def heartbeat(self, run_id: int) -> None:
        self.update(run_id, last_heartbeat_at=time.time())

    def progress(self, run_id: int, progress: Progress) -> None:
        """Record the supervisor's liveness readings (monotonic) as wall-clock times."""
        offset = time.time() - time.monotonic()
        event = None if progress.last_event is None else progress.last_event + offset
        busy = None if progress.last_busy is None else progress.last_busy + offset
        fields: dict[str, Any] = {
            "last_event_at": event,
            "clock": progress.clock,
            "stall_limit": progress.stall_limit,
            "busy_at": busy,
        }
        if progress.pid is not None:  # later readings leave the pid the first one gave
            fields["pid"] = progress.pid
        self.update(run_id, **fields)

    def spent(self, run_id: int, tokens: int, cost_usd: float) -> None:
        """Add what new ledger records of the run hold (``run/spending.py``)."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None:
                run.tokens += tokens
                run.cost_usd = round(run.cost_usd + cost_usd, 6)

    def snapshot(self) -> list[ActiveRun]:
        """Copies of the entries: a worker's later update never changes what was read."""
        with self._lock:
            return [replace(run, warnings=list(run.warnings)) for run in self._runs.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)
