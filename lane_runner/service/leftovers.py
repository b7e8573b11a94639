"""Provider processes a killed daemon left behind, found and ended at the next start.

A ``kill -9`` of the daemon orphans its CLI process trees (they run in their own
sessions, so nothing signals them). Every worker carries ``LANE_RUNNER_NODE``
in its environment; at start-up, holding the home lock, the daemon knows no
other process of this node may legitimately run a worker, so any process still
carrying the node id is a leftover. This is the one place that reads all of
``/proc``: once per start, never per tick. Signals go through pidfds, so a PID
reused between the scan and the kill is never hit.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from lane_runner.providers import cgroup

log = logging.getLogger(__name__)

NODE_VARIABLE = "LANE_RUNNER_NODE"


def find(node: str, proc: Path = Path("/proc")) -> list[int]:
    """PIDs of processes whose environment carries this node's id."""
    marker = f"{NODE_VARIABLE}={node}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone already, or not ours to read: nothing to end
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def end(node: str) -> list[int]:
    """SIGKILL every leftover worker process of ``node``, and every process left in a
    dead daemon's attempt cgroups (found by membership, whatever its environment);
    returns the PIDs signalled."""
    ended = cgroup.sweep()
    for pid in find(node):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if marker_still_there(pid, node):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                ended.append(pid)
        except ProcessLookupError:
            pass  # it exited between the check and the signal: the goal is reached
        finally:
            os.close(pidfd)
    if ended:
        log.warning("ended %d provider processes left by a previous daemon: %s", len(ended), ended)
    return ended


def marker_still_there(pid: int, node: str) -> bool:
    """Re-check after the pidfd pins the process, so a reused PID is never signalled."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{NODE_VARIABLE}={node}".encode() in environ.split(b"\0")
