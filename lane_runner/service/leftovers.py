"""Processes a killed daemon left behind, found and ended at the next start.

A ``kill -9`` of the daemon orphans its CLI process trees, and the git commands and
hooks its runs and cleanup had started, with whatever those left in the background
(they run in their own sessions, so nothing signals them). Every one of them
carries ``LANE_RUNNER_NODE`` and ``LANE_RUNNER_NODE_HOME`` (the home's real path)
in its environment (a CLI through the executor, a git command or hook through
``command.Supervision``); where the host has cgroups, each also sits in a group of
the dead daemon's, which ``cgroup.sweep`` ends whatever its environment. At
start-up, holding the home lock, the daemon knows no other process of this node
and home may legitimately run a worker, so any process still carrying both is a
leftover. The home counts because a copy of a home carries the node id too: its
recovery must never end the original's live CLIs (``service/identity.py`` refuses
such a copy anyway, until it is adopted or given a node id of its own). This is
the one place that reads all of ``/proc``: once per start, never per tick. Signals
go through pidfds, so a PID reused between the scan and the kill is never hit.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from lane_runner.providers import cgroup

log = logging.getLogger(__name__)

NODE_VARIABLE = "LANE_RUNNER_NODE"
HOME_VARIABLE = "LANE_RUNNER_NODE_HOME"


def markers(node: str, home: Path) -> dict[str, str]:
    """What every worker carries in its environment: the node id and the home's real path."""
    return {NODE_VARIABLE: node, HOME_VARIABLE: os.path.realpath(home)}


def carries(environ: bytes, node: str, home: Path | None) -> bool:
    """Whether a process environment (``/proc/<pid>/environ``) marks a worker of ``node``
    and, when given, of ``home``. A worker started before the home marker existed carries
    none, and is taken for this home's."""
    entries = environ.split(b"\0")
    if f"{NODE_VARIABLE}={node}".encode() not in entries:
        return False
    prefix = f"{HOME_VARIABLE}=".encode()
    homes = [entry.removeprefix(prefix) for entry in entries if entry.startswith(prefix)]
    return home is None or not homes or os.fsencode(os.path.realpath(home)) in homes


def find(node: str, proc: Path = Path("/proc"), *, home: Path | None = None) -> list[int]:
    """PIDs of processes whose environment marks a worker of ``node`` (and ``home``)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone already, or not ours to read: nothing to end
        if carries(environ, node, home):
            found.append(int(entry.name))
    return found


def end(node: str, home: Path) -> list[int]:
    """SIGKILL every leftover process (CLI, git, hook) of ``node`` in ``home``, and every
    process left in a dead daemon's cgroups (found by membership, whatever its
    environment); returns the PIDs signalled."""
    ended = cgroup.sweep()
    for pid in find(node, home=home):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if marker_still_there(pid, node, home):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                ended.append(pid)
        except ProcessLookupError:
            pass  # it exited between the check and the signal: the goal is reached
        finally:
            os.close(pidfd)
    if ended:
        log.warning("ended %d processes left by a previous daemon: %s", len(ended), ended)
    return ended


def marker_still_there(pid: int, node: str, home: Path) -> bool:
    """Re-check after the pidfd pins the process, so a reused PID is never signalled."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return carries(environ, node, home)
