"""``<home>/status.json``: what a running daemon is doing, published for ``lane-runner status``.

The daemon runs in another process, so it publishes its activity (active runs,
slots, pending finalizations) as a file replaced atomically, at most about once
a second and only when something changed. A reader trusts the file only while
the home lock is held by the daemon pid that wrote it: a killed daemon leaves
its last file behind, and that file then describes nobody.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from lane_runner import files
from lane_runner.service.activity import ActiveRun
from lane_runner.service.lock import Holder

log = logging.getLogger(__name__)

FORMAT = 1
MAX_BYTES = 1 << 20
PUBLISH_INTERVAL = 1.0


class Publisher:
    """Writes the daemon's document when it changed, no more than once per interval."""

    def __init__(self, path: Path, interval: float = PUBLISH_INTERVAL) -> None:
        self.path = path
        self.interval = interval
        self._last: dict[str, Any] | None = None
        self._last_at = float("-inf")
        self._failure: str | None = None

    def due(self, now: float) -> bool:
        return now - self._last_at >= self.interval

    def publish(self, document: dict[str, Any], now: float) -> bool:
        """True when written; ``published_at`` is added here, so it never counts as a change.

        A file that cannot be written (a full disk, an unwritable home) is logged at
        warning once until it works again, and tried again an interval later: status
        is for people, and the loop and the watchdog must go on without it.
        """
        if document == self._last or not self.due(now):
            return False
        self._last_at = now
        try:
            files.write(self.path, orjson.dumps({**document, "published_at": time.time()}))
        except OSError as error:
            if self._failure != error.strerror:  # the message names a fresh temporary file
                log.warning("cannot publish %s (status shows stale data): %s", self.path, error)
            self._failure = error.strerror
            return False
        if self._failure is not None:
            log.info("%s published again", self.path)
            self._failure = None
        self._last = document
        return True

    def withdraw(self) -> None:
        """A clean stop removes the file: nothing runs any more."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return


def document(
    *,
    started_at: float,
    node: str,
    concurrency: int,
    active: list[ActiveRun],
    runs_finished: int,
    pending_finalizations: int,
    metrics_port: int | None,
    metrics_address: str | None,
    paused: dict[str, Any] | None,
    hold: dict[str, str] | None,
    providers: dict[str, Any],
    memory: dict[str, Any] | None,
    disk: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
    stopping: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``paused``: this runner's pause; ``hold``: why the last claim turn claimed nothing
    although slots were free (kind and message); ``providers``: per-provider slots;
    ``memory``: the last memory reading and its pressure; ``disk``: the free space of the
    home's and the known workspaces' filesystems; ``config``: the configuration file, why
    its last reload was refused and which changed keys wait for a restart;
    ``stopping``: a shutdown in progress (``service/stopping.py``)."""
    return {
        "format": FORMAT,
        "pid": os.getpid(),
        "node": node,
        "started_at": started_at,
        "concurrency": concurrency,
        "active": [asdict(run) for run in sorted(active, key=lambda run: run.run_id)],
        "runs_finished": runs_finished,
        "pending_finalizations": pending_finalizations,
        "metrics_port": metrics_port,
        "metrics_address": metrics_address,
        "paused": paused,
        "hold": hold,
        "providers": providers,
        "memory": memory,
        "disk": disk or [],
        "config": config,
        "stopping": stopping,
    }


def read(path: Path) -> dict[str, Any] | None:
    """The published document, or None when absent or unreadable (never trusted blindly)."""
    try:
        data = files.read(path, MAX_BYTES)
        found = orjson.loads(data) if len(data) <= MAX_BYTES else None
    except (OSError, orjson.JSONDecodeError):
        return None
    return found if isinstance(found, dict) else None


class DaemonState(enum.StrEnum):
    RUNNING = "running"  # the lock holder is the daemon that wrote status.json
    STARTING = "starting"  # a daemon holds the lock but has not published yet (recovering)
    RECOVERING = "recovering"  # ``lane-runner recover`` holds the lock
    STOPPED = "stopped"  # nobody holds the lock
    STALE = "stale"  # nobody holds the lock, and a dead daemon's status.json is left


@dataclass(frozen=True)
class DaemonView:
    state: DaemonState
    pid: int | None
    since: float | None
    detail: str
    published: dict[str, Any] | None  # only when trusted


def judge(
    holder: Holder | None, last_holder: dict[str, Any] | None, published: dict[str, Any] | None
) -> DaemonView:
    """Who runs this home, and whether ``status.json`` may be believed. Pure."""
    if holder is not None:
        if holder.command != "daemon":
            return DaemonView(
                DaemonState.RECOVERING,
                holder.pid,
                holder.since,
                f"{holder.command or 'a lane-runner'} (pid {holder.pid}) holds the home lock",
                None,
            )
        if published is not None and published.get("pid") == holder.pid:
            return DaemonView(DaemonState.RUNNING, holder.pid, holder.since, "serving", published)
        return DaemonView(
            DaemonState.STARTING,
            holder.pid,
            holder.since,
            "holds the lock but has not published its status yet (recovering?)",
            None,
        )
    last_pid = (last_holder or {}).get("pid")
    if published is not None:
        return DaemonView(
            DaemonState.STALE,
            None,
            None,
            f"no daemon holds the lock; status.json of pid {published.get('pid')} is stale "
            "(the daemon died without a clean stop)",
            None,
        )
    detail = "no daemon holds the lock"
    if last_pid is not None:
        detail += f" (last held by {(last_holder or {}).get('command')} pid {last_pid})"
    return DaemonView(DaemonState.STOPPED, None, None, detail, None)
