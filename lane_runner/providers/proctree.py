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

A tree may hold thousands of descendants, so it holds thousands of pidfds: they are
watched with ``poll`` (``select`` refuses any descriptor past 1,024), closed as soon
as their process is reaped, and every one is closed when the tree is killed. The
kill never raises: an attempt's verdict does not depend on it, and a raise there
would leave the tree running and its pidfds open in the daemon.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import pwd
import resource
import select
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from lane_runner.providers.cgroup import AttemptGroup

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
TOKEN_VARIABLE = "LANE_RUNNER_ATTEMPT"
#: The descriptor limit the systemd unit gives the daemon (``LimitNOFILE``); a daemon
#: started elsewhere raises its soft limit to it (or to the hard limit when lower).
DESCRIPTOR_LIMIT = 65536


@functools.cache
def become_subreaper() -> bool:
    """Make this process the subreaper for its descendants (once; Linux only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d", ctypes.get_errno())
        return False
    return True


@functools.cache
def allow_descriptors(wanted: int = DESCRIPTOR_LIMIT) -> int:
    """Raise the soft descriptor limit to ``wanted`` (once); the soft limit now.

    Each descendant of an attempt is held by a pidfd, and a shell's default soft
    limit (1,024) is spent by one tool that leaves a thousand background processes.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as error:
            # Safe to go on: descendants past the limit are logged as unpinned, not fatal.
            log.warning("descriptor limit left at %d: %s", soft, error)
            return soft
        return target
    return soft


def user_ids(run_as: str | None) -> dict[str, Any]:
    """``subprocess`` arguments that start a process as ``run_as`` (none when unset)."""
    if not run_as:
        return {}
    entry = pwd.getpwnam(run_as)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def launch(
    argv: list[str], *, env: Mapping[str, str], run_as: str | None, **streams: Any
) -> ProcessTree:
    """Start ``argv`` as ``run_as`` in a session of its own, held as a tree from birth.

    Its environment carries a fresh token (found again in orphans whose parents
    died), and where the host allows it ``argv`` runs in a cgroup of its own, so
    even a descendant that left the session and cleared its environment is ended
    with it. Every process the runner starts goes through here: an agent CLI's
    attempt (``supervisor.py``) and each git command and hook (``run/command.py``).
    ``streams`` are ``Popen``'s ``cwd``, ``stdin``, ``stdout`` and ``stderr``.
    """
    become_subreaper()
    allow_descriptors()
    token = uuid.uuid4().hex
    group = AttemptGroup.create(token)
    # A process started as another user cannot move itself into the group: it is moved.
    launched = argv if group is None or run_as else group.launcher(argv)
    try:
        process = subprocess.Popen(
            launched,
            env={**env, TOKEN_VARIABLE: token},
            start_new_session=True,
            **streams,
            **user_ids(run_as),
        )
    except BaseException:
        if group is not None:
            group.remove()
        raise
    if group is not None and run_as:
        group.adopt(process.pid)
    return ProcessTree(process, token, group, sealed=group is not None and not run_as)


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


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime + cutime + cstime of ``pid`` from ``/proc/<pid>/stat``, in clock ticks."""
    try:
        fields = _read(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()
        return sum(int(field) for field in fields[11:15])
    except (OSError, IndexError, ValueError):
        return None


#: How often an empty environment is read again, and how far apart: a process in the
#: middle of an exec shows none until the kernel has set up the new image's (a hook's
#: leftover found just as it ran ``exec sleep 600`` was taken for a stranger and
#: outlived its tree).
ENVIRON_TRIES = 10
ENVIRON_PAUSE = 0.002


def _carries_token(pid: int, token: bytes) -> bool:
    """Whether ``pid``'s environment holds ``token``. An empty one is read again a few
    times (mid-exec); one still empty was cleared (``env -i``), which only the cgroup
    holds to its tree."""
    for _ in range(ENVIRON_TRIES):
        try:
            environ = _read(f"/proc/{pid}/environ")
        except OSError:
            return False
        if environ:
            return token in environ.split(b"\0")
        time.sleep(ENVIRON_PAUSE)
    return False


def _reaped(pidfd: int) -> bool:
    """The kernel shows ``Pid: -1`` for a pidfd whose process was already waited for."""
    try:
        info = _read(f"/proc/self/fdinfo/{pidfd}")
    except OSError:
        return False
    return b"\nPid:\t-1\n" in info


def _exited(pidfds: Iterable[int]) -> set[int]:
    """The pidfds among ``pidfds`` whose process has exited (a pidfd polls readable then).

    ``poll``, not ``select``: a tree's pidfds pass descriptor number 1,024.
    """
    poller = select.poll()
    for pidfd in pidfds:
        poller.register(pidfd, select.POLLIN)
    return {pidfd for pidfd, _ in poller.poll(0)}


class ProcessTree:
    """The descendants of one worker root, identified by pidfd."""

    def __init__(
        self,
        root: subprocess.Popen[bytes],
        token: str,
        group: AttemptGroup | None = None,
        *,
        sealed: bool = False,
    ) -> None:
        self._root = root
        self._token = f"{TOKEN_VARIABLE}={token}".encode()
        self._group = group
        self._sealed = sealed
        """The root was born inside ``group`` (the launcher moved itself in before its
        exec), so every descendant is a member: an empty group is an empty tree."""
        self._pidfds: dict[int, int] = {}
        self._unpinned = 0
        """Descendants seen but not held: no descriptor was left for their pidfd."""

    @property
    def root(self) -> subprocess.Popen[bytes]:
        """The process started; its descendants are the tree."""
        return self._root

    def refresh(self, *, adopt_orphans: bool = False) -> None:
        """Track descendants that appeared since the last walk; let go of reaped ones.

        ``adopt_orphans`` also looks among this process's own children for the
        attempt token: descendants whose parents already died.
        """
        self._settle()
        parents = [self._root.pid, *self._pidfds, *self._members()]
        if adopt_orphans:
            parents.extend(self._orphans())
        while parents:
            parent = parents.pop()
            for pid in children(parent):
                if self._untracked(pid) and self._track(pid, parent):
                    parents.append(pid)

    def _untracked(self, pid: int) -> bool:
        return pid != self._root.pid and pid not in self._pidfds

    def _members(self) -> list[int]:
        """Members of the attempt's cgroup not yet tracked, now pinned: they are its
        descendants whatever they did (setsid, double fork, a cleared environment),
        as membership is inherited."""
        if self._group is None:
            return []
        return [pid for pid in self._group.pids() if self._untracked(pid) and self._pin(pid)]

    def _orphans(self) -> list[int]:
        """This process's own children carrying the attempt token, now tracked:
        descendants whose parents already died."""
        me = os.getpid()
        return [
            pid for pid in children(me)
            if self._untracked(pid) and _carries_token(pid, self._token) and self._track(pid, me)
        ]

    def _open(self, pid: int) -> int | None:
        """A pidfd for ``pid``; None when it is gone or no descriptor is left for it."""
        try:
            return os.pidfd_open(pid)
        except ProcessLookupError:
            return None
        except OSError as error:
            # Safe to go on: the process group kill and the cgroup still reach it, and
            # the warning says how many the walk could not hold.
            if not self._unpinned:
                log.warning("cannot hold descendant %d by pidfd: %s", pid, error)
            self._unpinned += 1
            return None

    def _pin(self, pid: int) -> bool:
        """Track a member of the attempt's cgroup by pidfd (membership is the proof)."""
        pidfd = self._open(pid)
        if pidfd is None:
            return False
        self._pidfds[pid] = pidfd
        return True

    def _track(self, pid: int, parent: int) -> bool:
        pidfd = self._open(pid)
        if pidfd is None:
            return False
        if pid not in children(parent):
            os.close(pidfd)
            return False
        self._pidfds[pid] = pidfd
        return True

    def cpu_seconds(self) -> float | None:
        """CPU time the attempt has used so far: its cgroup's, which counts every member
        whatever became of it; else the root's and each living descendant's own and
        reaped children's (a descendant reaped by this process is missed: the reading
        only has to grow while the tree works). None when nothing could be read."""
        if self._group is not None:
            found = self._group.cpu_seconds()
            if found is not None:
                return found
        ticks = [_cpu_ticks(pid) for pid in [self._root.pid, *self.living()]]
        known = [tick for tick in ticks if tick is not None]
        return sum(known) / os.sysconf("SC_CLK_TCK") if known else None

    def living(self) -> list[int]:
        exited = _exited(self._pidfds.values())
        return [pid for pid, pidfd in self._pidfds.items() if pidfd not in exited]

    def signal(self, signum: int) -> None:
        """The root's process group, then every tracked descendant by pidfd."""
        if self._root.returncode is None:
            try:
                os.killpg(self._root.pid, signum)
            except ProcessLookupError:
                log.debug("process group %d already gone", self._root.pid)
            except PermissionError as error:  # the members left are not ours to signal
                log.warning("cannot signal process group %d: %s", self._root.pid, error)
        for pid, pidfd in self._pidfds.items():
            try:
                signal.pidfd_send_signal(pidfd, signum)
            except ProcessLookupError:
                log.debug("descendant %d already exited", pid)
            except PermissionError as error:  # it became another user's (a setuid tool)
                log.warning("cannot signal descendant %d: %s", pid, error)

    def kill(self, grace: float, poll: float = 0.02) -> None:
        """SIGTERM the whole tree, SIGKILL whatever is left after ``grace``, reap.

        Never raises, and every pidfd is closed when it returns.
        """
        try:
            self._end(grace, poll)
        except Exception:  # noqa: BLE001 - see below
            # Safe to swallow: the attempt's verdict does not depend on the kill, a raise
            # would skip the SIGKILL and the reaping, and the traceback is logged.
            log.exception("ending the process tree failed part-way; SIGKILL to what is held")
            self.signal(signal.SIGKILL)
            if self._group is not None:
                self._group.kill()
        finally:
            self._close_all()

    def _end(self, grace: float, poll: float) -> None:
        if self._nothing_left():
            # The common end of a git call: no walk of the daemon's children and no
            # reading of their environments, which cost a quarter of a git call's CPU.
            self._root.wait()
            self._close_all()
            if self._group is not None:
                self._group.remove()
            return
        self.refresh(adopt_orphans=True)
        self.signal(signal.SIGTERM)
        end = time.monotonic() + grace
        walked = False
        while time.monotonic() < end and self._any_alive():
            time.sleep(poll)
            self.refresh(adopt_orphans=True)
            walked = True
        if walked or self._pidfds:
            # Only a tree that had something alive can have grown since the first walk.
            self.refresh(adopt_orphans=True)
        if self._any_alive():
            self.signal(signal.SIGKILL)
        if self._group is not None:
            self._group.kill()  # whatever slipped past the walk: born in the group, dies with it
        self._root.wait()
        self.reap()
        if self._group is not None:
            self._group.remove()
        if self._unpinned:
            log.warning(
                "%d descendants could not be held by pidfd (descriptor limit); "
                "those outside the process group may outlive the attempt",
                self._unpinned,
            )

    def _nothing_left(self) -> bool:
        """The root has exited, nothing it started is held, and its sealed cgroup has no
        member: every descendant would be a member (``sealed``), so none is left.
        Never true without a sealed group: an orphan outside one is found only by the
        walk."""
        if not self._sealed or self._group is None or self._root.poll() is None:
            return False
        self._settle()
        return not self._pidfds and not self._group.pids()

    def _any_alive(self) -> bool:
        return self._root.poll() is None or bool(self.living())

    def reap(self, patience: float = 2.0) -> None:
        """Collect exited descendants re-parented to us; close every pidfd.

        A zombie whose own parent is still alive is that parent's to reap
        (``ChildProcessError`` here); it is done once the kernel says reaped.
        """
        end = time.monotonic() + patience
        self._settle()
        while self._pidfds and time.monotonic() < end:
            time.sleep(0.01)
            self._settle()
        for pid in self.living():
            log.warning("descendant %d still running after the tree was killed", pid)
        self._close_all()

    def _settle(self) -> None:
        """Let go of every exited descendant that is reaped, reaping our own zombies.

        A long run's tools come and go by the thousand: a pidfd is closed as soon as
        its process is reaped, so they never pile up in the daemon.
        """
        exited = _exited(self._pidfds.values())
        for pid, pidfd in [(pid, fd) for pid, fd in self._pidfds.items() if fd in exited]:
            if _reaped(pidfd) or _collect(pidfd):
                del self._pidfds[pid]
                os.close(pidfd)

    def _close_all(self) -> None:
        for pidfd in self._pidfds.values():
            os.close(pidfd)
        self._pidfds.clear()


def _collect(pidfd: int) -> bool:
    """Reap an exited descendant re-parented to us; False when it is another's to reap."""
    try:
        return os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG) is not None
    except ChildProcessError:
        return False  # a zombie of a living parent: that parent reaps it
