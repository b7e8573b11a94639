"""The runs in flight, as the daemon of this home publishes them (``status.json``,
believed only while that daemon holds the home lock) with what the board and the
system add: the lease's time left, the CLI's CPU time, its last words."""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lane_runner.board.base import BoardError, Store
from lane_runner.errors import NotFound
from lane_runner.home import Home
from lane_runner.service import lock, status
from lane_runner.web import logtail

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Flight:
    """One run in flight: the field names are ``/api/v1/state``'s ``runs``."""

    board: str
    task_id: str
    run_id: int
    provider: str | None
    model: str | None
    turn: int | None
    tokens: int
    cost_usd: float
    session_id: str | None
    last_message: str | None
    runtime_seconds: float
    heartbeat_age: float | None
    last_event_age: float | None
    lease_left: float | None
    cpu_seconds: float | None
    pid: int | None
    warnings: tuple[str, ...]
    role: str | None = None
    """``review`` while a reviewer's run of its own (``review_run``) is at work."""
    review_run: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def daemon(home: Home) -> status.DaemonView:
    """Who runs this home, and what it published when it does (``status.judge``)."""
    return status.judge(
        lock.holder(home.lock_file), lock.read_holder(home.lock_file), status.read(home.status_file)
    )


def cpu_seconds(pid: int | None) -> float | None:
    """User and system CPU time of the process and its reaped children (``/proc``)."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # gone, or not on Linux
    fields = stat.rpartition(")")[2].split()
    try:
        ticks = sum(int(value) for value in fields[11:15])
    except (ValueError, IndexError):
        return None
    return round(ticks / os.sysconf("SC_CLK_TCK"), 2)


def _age(now: float, at: Any) -> float | None:
    return None if not isinstance(at, int | float) else round(now - at, 1)


def _lease_left(store: Store, run: dict[str, Any], now: float) -> float | None:
    try:
        found = store.board(run["board"]).get_run(run["run_id"])
    except (BoardError, NotFound) as error:
        log.debug("no lease for run %s (%s)", run["run_id"], error)
        return None
    return round(found.lease_expires_at - now, 1)


def flights(store: Store, home: Home, now: float) -> list[Flight]:
    """The runs the daemon of this home runs now; none while no daemon serves it."""
    published = daemon(home).published or {}
    found = []
    for run in published.get("active", []):
        path = run.get("log_path")
        found.append(Flight(
            board=run["board"], task_id=run["task_id"], run_id=run["run_id"],
            provider=run.get("provider"), model=run.get("model"), turn=run.get("turn"),
            tokens=run.get("tokens") or 0, cost_usd=run.get("cost_usd") or 0.0,
            session_id=run.get("session_id"),
            last_message=logtail.last_line(Path(path)) if path else None,
            runtime_seconds=round(now - run["started_at"], 1),
            heartbeat_age=_age(now, run.get("last_heartbeat_at")),
            last_event_age=_age(now, run.get("last_event_at")),
            lease_left=_lease_left(store, run, now),
            cpu_seconds=cpu_seconds(run.get("pid")),
            pid=run.get("pid"),
            warnings=tuple(w["message"] for w in run.get("warnings", [])),
            role=run.get("role"), review_run=run.get("review_run"),
        ))
    return found
