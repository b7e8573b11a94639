"""A command the runner starts for a task (git, a hook): bounded as a whole tree.

git (``run/git.py``) and the operator's hooks (``run/hooks.py``) run this way, as
the worker user, and the same promises hold for each (docs/ARCHITECTURE.md §6):

- It is held as a tree (``providers/proctree.launch``, as an agent CLI is): its
  cgroup where the host has one, else its session, every descendant the walk
  finds and every orphan carrying its token, ``setsid`` or not.
- Its output goes to files, never pipes: a descendant that keeps git's stdout
  (a ``post-checkout`` hook's ``setsid indexer &``) cannot hold the call, which
  ends when its main process does, at its deadline, or at the shutdown.
- When it ends, whatever it left running is ended with it (SIGTERM, then SIGKILL
  after ``KILL_GRACE``): a hook's ``sleep 600 &`` ends with its hook, and a git
  call leaves nothing behind (git's automatic maintenance is therefore never
  started by the runner's git: a detached gc would only be killed).
- The thread that runs it may be bound to a ``Supervision`` (``supervised``): the
  daemon's shutdown (its cancel event) ends the command at once, and its markers
  in the environment let the next start or ``recover`` find what a daemon killed
  with ``kill -9`` left (``service/leftovers.py``).
"""

from __future__ import annotations

import enum
import os
import pwd
import select
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from lane_runner.providers.proctree import ProcessTree, launch

#: Names the command (``git``, ``sh`` for a hook) in its environment and its descendants':
#: what sets them apart from an agent CLI's processes, which carry the same markers.
COMMAND_VARIABLE = "LANE_RUNNER_COMMAND"
#: Seconds what a command left running gets between SIGTERM and SIGKILL.
KILL_GRACE = 2.0
#: How often a running command's tree is walked and the cancel event looked at.
TICK = 0.25


def home_of(user: str | None) -> Path | None:
    """The worker user's own home: its git configuration and credentials live there."""
    return Path(pwd.getpwnam(user).pw_dir) if user else None


class Timeout(Exception):
    """The command outlived its deadline and was killed, with its whole tree."""

    def __init__(self, seconds: float, stdout: str, stderr: str) -> None:
        super().__init__(f"did not finish within {seconds:g} s: killed")
        self.seconds = seconds
        self.stdout = stdout
        self.stderr = stderr


class Cancelled(Exception):
    """The daemon is shutting down: the command was ended (or never started).

    Not a failure of the task: the run is cut short as a crash would cut it, and the
    next start takes it up where the journal and the lane state say.
    """


@dataclass(frozen=True)
class Supervision:
    """What the daemon tells every command a thread of its runs: the event that ends
    it (the shutdown), and the markers its environment carries (``leftovers.markers``)."""

    cancel: threading.Event | None = None
    markers: Mapping[str, str] = field(default_factory=dict)


class _Bound(threading.local):
    supervision = Supervision()


_bound = _Bound()


@contextmanager
def supervised(supervision: Supervision) -> Iterator[None]:
    """Commands this thread runs meanwhile are under ``supervision``.

    Bound per thread (as ``router/deadline.py`` binds a routing call's deadline) so
    the shutdown reaches a git call deep in a delivery or a push without every
    caller passing an event down.
    """
    previous = _bound.supervision
    _bound.supervision = supervision
    try:
        yield
    finally:
        _bound.supervision = previous


@contextmanager
def also_ended_by(cancel: threading.Event) -> Iterator[None]:
    """Commands this thread runs meanwhile end at ``cancel`` too (a run's own event: an
    operator's ``task stop`` as well as the shutdown), with the markers they had."""
    with supervised(Supervision(cancel, _bound.supervision.markers)):
        yield


class _Ending(enum.Enum):
    EXITED = "exited"
    LATE = "late"
    CANCELLED = "cancelled"


def run(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    owner: str | None = None,
    stdin: str | bytes | None = None,
    output: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end or its deadline; ``Timeout`` when it was killed at its
    deadline, ``Cancelled`` when the shutdown ended it.

    ``stdin`` is fed to it (else it reads nothing); ``output`` takes its stdout and
    stderr together (a file of the caller's), else both are returned as text.
    """
    supervision = _bound.supervision
    if supervision.cancel is not None and supervision.cancel.is_set():
        raise Cancelled(f"{argv[0]} not started: the runner is stopping")
    with ExitStack() as files:
        given: IO[bytes] | int = subprocess.DEVNULL
        if stdin is not None:
            given = files.enter_context(_scratch())
            given.write(stdin if isinstance(stdin, bytes) else stdin.encode())
            given.seek(0)
        stdout = output if output is not None else files.enter_context(_scratch())
        stderr = None if output is not None else files.enter_context(_scratch())
        tree = launch(
            argv,
            env={**env, **supervision.markers, COMMAND_VARIABLE: os.path.basename(argv[0])},
            run_as=owner,
            cwd=cwd,
            stdin=given,
            stdout=stdout,
            stderr=stderr if stderr is not None else subprocess.STDOUT,
        )
        try:
            ending = _wait(tree, timeout, supervision.cancel)
        finally:
            tree.kill(KILL_GRACE)  # what it left running, or all of it when cut short
        said = "" if output is not None else _text(stdout)
        complained = "" if stderr is None else _text(stderr)
    if ending is _Ending.LATE:
        raise Timeout(timeout, said, complained)
    if ending is _Ending.CANCELLED:
        raise Cancelled(f"{argv[0]} ended: the runner is stopping")
    return subprocess.CompletedProcess(argv, tree.root.wait(), said, complained)


def _scratch() -> IO[bytes]:
    """An anonymous file in memory (``memfd_create``) for a command's input or its output:
    a file as a temporary one is, so a descendant keeping it holds nothing up, but no
    inode of a file system made and deleted for it (three per git call, on the task's
    every git call: issue 46)."""
    return os.fdopen(os.memfd_create("lane-runner-command", os.MFD_CLOEXEC), "w+b")


def _wait(tree: ProcessTree, timeout: float, cancel: threading.Event | None) -> _Ending:
    """Until the main process exits (its pidfd polls readable; it is not reaped, so its
    process group cannot be reused before the tree is killed), the deadline, or the
    cancel. The tree is walked every tick, so descendants are held while their parents
    still link them to it."""
    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(tree.root.pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return _Ending.LATE
            if cancel is not None and cancel.is_set():
                return _Ending.CANCELLED
            if poller.poll(min(left, TICK) * 1000):
                return _Ending.EXITED
            tree.refresh()
    finally:
        os.close(pidfd)


def _text(file: IO[bytes]) -> str:
    """What the command wrote, as text with universal newlines (as a text pipe gave it)."""
    file.seek(0)
    return file.read().decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
