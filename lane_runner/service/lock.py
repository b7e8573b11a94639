"""One daemon or ``recover`` per home: ``runner.lock`` (docs/ARCHITECTURE.md §6).

The lock is an flock held by filelock for the life of the process; the kernel
drops it when the process dies, so a ``kill -9`` never leaves a home locked.
The holder writes its pid and command into the lock file so the next one can
say who holds it.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from filelock import FileLock, Timeout

from lane_runner import files
from lane_runner.errors import LaneRunnerError

log = logging.getLogger(__name__)

# How long taking the lock waits for its holder to let go. ``holder`` (``lane-runner
# status``) probes by taking the lock for an instant: a daemon starting in that instant
# waits the probe out instead of reporting another lane-runner. A real holder keeps it
# far longer, and is named after that second.
PATIENCE = 1.0


@dataclass(frozen=True)
class Holder:
    pid: int | None
    command: str | None
    since: float | None


class HomeLocked(LaneRunnerError):
    """Another lane-runner holds this home."""


def _describe(holder: Holder | None, path: Path) -> str:
    if holder is None or holder.pid is None:
        return f"another lane-runner holds {path}; stop it first"
    return (
        f"another lane-runner ({holder.command or 'process'}, pid {holder.pid}) holds {path}; "
        f"stop it first (e.g. 'systemctl stop lane-runner' or 'kill {holder.pid}')"
    )


def read_holder(path: Path) -> dict[str, Any] | None:
    """What the last holder wrote into the lock file (it may have died since)."""
    try:
        document = orjson.loads(files.read(path, 4096)[:4096])
    except (OSError, orjson.JSONDecodeError):
        return None
    return document if isinstance(document, dict) else None


def _recorded_holder(path: Path) -> Holder:
    info = read_holder(path) or {}
    return Holder(info.get("pid"), info.get("command"), info.get("since"))


def holder(path: Path) -> Holder | None:
    """The live holder of the lock, or None when nobody holds it."""
    probe = FileLock(path, timeout=0, preserve_lock_file=True)
    try:
        probe.acquire()
    except Timeout:
        return _recorded_holder(path)
    except OSError as error:
        log.warning("cannot probe %s: %s", path, error)
        return None
    probe.release()
    return None


class HomeLock:
    """``with HomeLock(path, "daemon"):`` — raises HomeLocked naming the holder."""

    def __init__(self, path: Path, command: str) -> None:
        self.path = path
        self.command = command
        self._lock = FileLock(
            path,
            timeout=PATIENCE,
            poll_interval=0.01,
            preserve_lock_file=True,
            mode=0o600,
            on_acquired=self._write_holder,
        )

    def _write_holder(self, fd: int) -> None:
        document = {"pid": os.getpid(), "command": self.command, "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(document) + b"\n", 0)

    def __enter__(self) -> HomeLock:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # filelock opens the name with O_TRUNC and follows links: make sure a regular file
        # of ours is there first (a planted link or FIFO is moved aside). The home is 0700,
        # so nobody but this user can swap it back in between.
        os.close(files.open_append(self.path))
        try:
            self._lock.acquire()
        except Timeout:
            raise HomeLocked(_describe(_recorded_holder(self.path), self.path)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
