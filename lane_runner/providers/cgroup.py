"""Every descendant of an attempt in one cgroup (v2), where the host allows it.

A tool process that double-forks, calls ``setsid`` and clears its environment
leaves the process tree (its parents are gone), its session and the attempt
token behind: the tree walk and the token cannot find it. Cgroup membership is
inherited by every fork and cannot be left without write access to the
hierarchy, so each attempt runs in its own cgroup and ending the attempt writes
``cgroup.kill`` (or SIGKILLs every member where the kernel predates it).

Layout: ``<the daemon's own cgroup>/lane-runner-<pid>-<start>/<token>``. The
daemon's pid and start time name its groups, so a later daemon or ``recover``
can end the groups a killed daemon left (``sweep``) without touching those of a
daemon still alive (another home on the same host).

Where there is no writable cgroup v2 hierarchy (a v1-only host, an unprivileged
container, a systemd unit without ``Delegate=yes``) the runner falls back to
what ``proctree`` does: subreaper, tree walk and attempt token (docs/ARCHITECTURE.md §6).
A CLI run as another user (``worker_user``) cannot move itself into the group
(moving needs write access to the common ancestor), so the daemon moves it right
after it starts: a descendant forked in that instant would escape the group.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "lane-runner-"
#: Moves the launcher into the group, then becomes the CLI: every descendant is born inside.
_ENTER = '{ echo 0 > "$0"; } 2>/dev/null; exec "$@"'


def _own_cgroup() -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::")), None)


def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split()[0] == "cgroup2":
            return Path(fields[0].split()[4])
    return None


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def parent() -> Path | None:
    """The directory holding this process's cgroups of its own: the daemon's own
    cgroup, or None when there is no cgroup v2 hierarchy this process can write."""
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return None
    path = mount / own.lstrip("/")
    return path if os.access(path, os.W_OK) else None


@functools.cache
def _base() -> Path | None:
    """This daemon's group directory, made once; None (logged once) where unavailable."""
    above = parent()
    if above is None:
        log.info("no writable cgroup v2 here: attempts are contained by process tree and token")
        return None
    base = above / f"{PREFIX}{os.getpid()}-{_start_time(os.getpid())}"
    try:
        base.mkdir(exist_ok=True)
    except OSError as error:
        log.info(
            "cannot make %s (%s): attempts are contained by process tree and token", base, error
        )
        return None
    return base


class AttemptGroup:
    """One attempt's cgroup: every descendant of its CLI, whatever it does."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, token: str) -> AttemptGroup | None:
        base = _base()
        if base is None:
            return None
        try:
            (base / token).mkdir()
        except OSError as error:
            log.warning(
                "cannot make the attempt's cgroup (%s); the process tree contains it", error
            )
            return None
        return cls(base / token)

    def launcher(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the group: a shell moves itself in, then execs it."""
        return ["/bin/sh", "-c", _ENTER, str(self.path / "cgroup.procs"), *argv]

    def adopt(self, pid: int) -> None:
        """Move ``pid`` in from outside (a CLI run as another user cannot move itself)."""
        try:
            (self.path / "cgroup.procs").write_text(f"{pid}\n")
        except OSError as error:
            log.warning("cannot move pid %d into %s: %s", pid, self.path, error)

    def pids(self) -> list[int]:
        try:
            return [int(word) for word in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def cpu_seconds(self) -> float | None:
        """CPU time every member, living or gone, has used so far (``cpu.stat``'s
        ``usage_usec``, kept by the kernel whether or not the cpu controller is on);
        None when unreadable."""
        try:
            return cpu_usage((self.path / "cpu.stat").read_text())
        except OSError as error:
            log.debug("cpu.stat of %s unreadable: %s", self.path, error)
            return None

    def kill(self) -> None:
        """SIGKILL every member, at once where the kernel has ``cgroup.kill`` (5.14+)."""
        try:
            (self.path / "cgroup.kill").write_text("1\n")
            return
        except OSError as error:
            log.debug("no cgroup.kill in %s (%s); signalling each member", self.path, error)
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):  # gone already: the goal
                os.kill(pid, signal.SIGKILL)

    def remove(self, patience: float = 2.0) -> bool:
        """Remove the emptied group; False (logged) when members are still dying."""
        end = time.monotonic() + patience
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError as error:
                if time.monotonic() > end:
                    log.warning("cgroup %s not removed: %s", self.path, error)
                    return False
            self.kill()
            time.sleep(0.01)


def cpu_usage(stat: str) -> float | None:
    """Seconds of CPU from ``cpu.stat`` text (pure): its ``usage_usec``."""
    for line in stat.splitlines():
        name, _, value = line.partition(" ")
        if name == "usage_usec" and value.strip().isdigit():
            return int(value) / 1e6
    return None


def sweep() -> list[int]:
    """End the attempt groups of daemons that died, beside this one; the pids killed.

    Called at start and by ``recover``: a killed daemon's CLIs and whatever they
    spawned (environment cleared or not) are found by membership.
    """
    above = parent()
    if above is None:
        return []
    killed: list[int] = []
    for daemon in above.glob(f"{PREFIX}*"):
        pid, _, start = daemon.name[len(PREFIX) :].partition("-")
        if not pid.isdigit() or _start_time(int(pid)) == start:
            continue  # a living daemon's (this one's included)
        try:
            attempts = [p for p in daemon.iterdir() if p.is_dir()]
        except FileNotFoundError:
            continue  # another home's daemon, starting at the same moment, swept it first
        for attempt in attempts:
            group = AttemptGroup(attempt)
            killed += group.pids()
            group.kill()
            group.remove()
        with contextlib.suppress(OSError):  # a group that would not empty: next time
            daemon.rmdir()
    if killed:
        log.warning("ended %d processes left in a dead daemon's cgroups: %s", len(killed), killed)
    return killed
