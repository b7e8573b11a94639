"""A worker's process tree: find every descendant, signal it safely, reap it.

Agent CLIs start tool processes that call ``setsid`` (so a process-group kill
misses them) and sometimes ignore SIGTERM. The runner therefore

- is a child subreaper, so orphaned descendants are re-parented to it instead
  of init and stay findable;
- walks ``/proc/<pid>/task/*/children`` from the worker root (never all of
  ``/proc``) and holds a pidfd for each descendant, so a signal can never hit
  a process that reused a dead descendant's PID;
- recognises orphans re-parented to it by the attempt token in their
  environment (they are its own children, but other workers' roots are too);
- where the host has a writable cgroup v2 hierarchy, runs each attempt in its own
  cgroup (``cgroup.py``) and tracks and kills its members too, so a descendant
  that double-forked, called ``setsid`` and cleared its environment dies with it;
- reaps through those pidfds (``waitid(P_PIDFD)``), never ``waitpid(-1)``,
  which would steal exit statuses from other workers' ``Popen`` objects.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import select
import signal
import subprocess
import time

from lane_runner.providers.cgroup import AttemptGroup

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
TOKEN_VARIABLE = "LANE_RUNNER_ATTEMPT"


@functools.cache
def become_subreaper() -> bool:
    """Make this process the subreaper for its descendants (once; Linux only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d", ctypes.get_errno())
        return False
    return True


def children(pid: int) -> set[int]:
    """Direct children of ``pid`` (all its threads); empty once it is gone.

    Plain ``os`` calls: this runs at every tick of every supervised run and
    walks each thread of the daemon when looking for orphans.
    """
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found.update(int(word) for word in _read(f"/proc/{pid}/task/{task}/children").split())
        except OSError:
            continue
    return found


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _carries_token(pid: int, token: bytes) -> bool:
    try:
        environ = _read(f"/proc/{pid}/environ")
    except OSError:
        return False
    return token in environ.split(b"\0")


def _reaped(pidfd: int) -> bool:
    """The kernel shows ``Pid: -1`` for a pidfd whose process was already waited for."""
    try:
        info = _read(f"/proc/self/fdinfo/{pidfd}")
    except OSError:
        return False
    return b"\nPid:\t-1\n" in info


def _exited(pidfd: int) -> bool:
    readable, _, _ = select.select([pidfd], [], [], 0)
    return bool(readable)


class ProcessTree:
    """The descendants of one worker root, identified by pidfd."""

    def __init__(
        self, root: subprocess.Popen[bytes], token: str, group: AttemptGroup | None = None
    ) -> None:
        self._root = root
        self._token = f"{TOKEN_VARIABLE}={token}".encode()
        self._group = group
        self._pidfds: dict[int, int] = {}

    def refresh(self, *, adopt_orphans: bool = False) -> None:
        """Track descendants that appeared since the last walk.

        ``adopt_orphans`` also looks among this process's own children for the
        attempt token: descendants whose parents already died.
        """
        parents = [self._root.pid, *self._pidfds]
        if self._group is not None:
            # Members of the attempt's cgroup are its descendants whatever they did
            # (setsid, double fork, a cleared environment): membership is inherited.
            for pid in self._group.pids():
                if pid != self._root.pid and pid not in self._pidfds and self._pin(pid):
                    parents.append(pid)
        if adopt_orphans:
            parents.extend(
                pid
                for pid in children(os.getpid())
                if pid != self._root.pid and pid not in self._pidfds
                and _carries_token(pid, self._token)
                and self._track(pid, os.getpid())
            )
        while parents:
            parent = parents.pop()
            for pid in children(parent):
                if pid != self._root.pid and pid not in self._pidfds and self._track(pid, parent):
                    parents.append(pid)

    def _pin(self, pid: int) -> bool:
        """Track a member of the attempt's cgroup by pidfd (membership is the proof)."""
        try:
            self._pidfds[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            return False
        return True

    def _track(self, pid: int, parent: int) -> bool:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return False
        if pid not in children(parent):
            os.close(pidfd)
            return False
        self._pidfds[pid] = pidfd
        return True

    def living(self) -> list[int]:
        return [pid for pid, fd in self._pidfds.items() if not _exited(fd)]

    def signal(self, signum: int) -> None:
        """The root's process group, then every tracked descendant by pidfd."""
        if self._root.returncode is None:
            try:
                os.killpg(self._root.pid, signum)
            except ProcessLookupError:
                log.debug("process group %d already gone", self._root.pid)
        for pid, pidfd in self._pidfds.items():
            try:
                signal.pidfd_send_signal(pidfd, signum)
            except ProcessLookupError:
                log.debug("descendant %d already exited", pid)

    def kill(self, grace: float, poll: float = 0.02) -> None:
        """SIGTERM the whole tree, SIGKILL whatever is left after ``grace``, reap."""
        self.refresh(adopt_orphans=True)
        self.signal(signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and self._any_alive():
            time.sleep(poll)
            self.refresh(adopt_orphans=True)
        self.refresh(adopt_orphans=True)
        if self._any_alive():
            self.signal(signal.SIGKILL)
        if self._group is not None:
            self._group.kill()  # whatever slipped past the walk: born in the group, dies with it
        self._root.wait()
        self.reap()
        if self._group is not None:
            self._group.remove()

    def _any_alive(self) -> bool:
        return self._root.poll() is None or bool(self.living())

    def reap(self, patience: float = 2.0) -> None:
        """Collect exited descendants re-parented to us; close every pidfd.

        A zombie whose own parent is still alive is that parent's to reap
        (``ChildProcessError`` here); it is done once the kernel says reaped.
        """
        end = time.monotonic() + patience
        pending = dict(self._pidfds)
        while pending and time.monotonic() < end:
            for pid, pidfd in list(pending.items()):
                if _reaped(pidfd):
                    pending.pop(pid)
                elif _exited(pidfd):
                    self._collect(pid, pidfd, pending)
            if pending:
                time.sleep(0.01)
        for pid, pidfd in self._pidfds.items():
            if pid in pending:
                log.warning("descendant %d still running after the tree was killed", pid)
            os.close(pidfd)
        self._pidfds.clear()

    @staticmethod
    def _collect(pid: int, pidfd: int, pending: dict[int, int]) -> None:
        try:
            os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
        except ChildProcessError:
            log.debug("zombie %d belongs to a living parent; waiting for it to reap", pid)
            return
        pending.pop(pid)
