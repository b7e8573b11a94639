"""Run one CLI process and keep it honest until it ends.

The supervisor owns the clocks (heartbeat, maximum runtime, stall) and the
streams; what an event *means* is the adapter's business, handed in as
``on_event``, and so is whether the CLI has given its final answer (``answered``)
and whether one of its tool calls is in flight (``in_flight``).
A result is a result: once it has, the attempt is over. The CLI gets
``closing_grace`` to exit, then its tree is ended and the answer stands; the stall
clock and the runtime no longer apply to a CLI that has answered.

Liveness has two clocks (docs/ARCHITECTURE.md §6). The stall clock counts from the
last meaningful event, or from the last time the attempt's processes were found
using CPU (``busy_cpu`` CPU-seconds per second over a ``cpu_interval``, read from
the attempt's cgroup, ``ProcessTree.cpu_seconds``), whichever is later: a build or
a test suite that prints nothing but works is alive. Its limit is ``stall_timeout``,
or ``tool_stall_timeout`` while a tool call is in flight. A CLI stuck reconnecting
(no events, hardly any CPU) is still ended at ``stall_timeout``.

Pipes are read with ``os.read`` on a selector, never ``readline``, so a child that
prints half a line and hangs cannot block us.
The pipe loop never waits on the board either: heartbeats run on their own
thread beside it (``_Heartbeat``), and the loop only looks whether the lease
was lost.
"""

from __future__ import annotations

import fcntl
import logging
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from lane_runner.providers.lines import LineSplitter, Tail
from lane_runner.providers.model import Classification, Progress
from lane_runner.providers.proctree import ProcessTree, launch
from lane_runner.providers.tasklog import TaskLog

log = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
PIPE_CHUNK = 64 * 1024
#: The CLI's stdout pipe (Linux's default is 64 KiB): a chatty CLI then fills whole
#: reads, and both sides wake a quarter as often (about 14 % faster streaming).
STDOUT_PIPE_SIZE = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    deadline: float
    """Monotonic time by which the run must be over (maximum runtime)."""
    heartbeat_interval: float = 20.0
    stall_timeout: float = 900.0
    kill_grace: float = 5.0
    tick: float = 0.25
    """Longest wait between checks; bounds how late a cancel is noticed."""
    linger: float = 1.0
    """After the CLI exits, how long its leftover descendants may keep our pipes open."""
    closing_grace: float = 5.0
    """After the CLI's final answer, how long it may take to exit before its tree is ended."""
    tool_stall_timeout: float = 3600.0
    """The stall limit while one of the CLI's tool calls is in flight."""
    busy_cpu: float = 0.0
    """CPU-seconds per second above which a quiet attempt counts as working; 0: off."""
    cpu_interval: float = 30.0
    """How often the attempt's CPU time is read."""


@dataclass
class Clocks:
    started: float
    last_event: float
    last_heartbeat: float
    answered: float | None = None
    """When the CLI gave its final answer, once it has."""
    last_busy: float = 0.0
    """When the attempt's processes were last found using CPU (``busy_cpu``)."""
    cpu_seconds: float | None = None
    """The attempt's CPU time at ``cpu_read_at``."""
    cpu_read_at: float = 0.0


STALL = "stall"
TOOL = "tool"


def stall_clock(limits: Limits, in_flight: bool) -> tuple[str, float]:
    """Which stall clock runs and its limit: ``tool`` while a tool call is in flight."""
    return (TOOL, limits.tool_stall_timeout) if in_flight else (STALL, limits.stall_timeout)


def quiet_since(clocks: Clocks) -> float:
    """Since when the attempt has shown no sign of work: no event, no CPU."""
    return max(clocks.last_event, clocks.last_busy)


def busy(before: float | None, after: float | None, elapsed: float, threshold: float) -> bool:
    """Whether CPU time going from ``before`` to ``after`` in ``elapsed`` seconds is work:
    more than ``threshold`` CPU-seconds per second (pure; off at 0 or without readings)."""
    if threshold <= 0 or before is None or after is None or elapsed <= 0:
        return False
    return (after - before) / elapsed > threshold


@dataclass(frozen=True)
class Ended:
    exit_status: int | None
    signal: int | None
    stopped: Classification | None
    """Set when the supervisor ended the run (limit, lease, cancel), not the CLI."""
    stop_reason: str
    stderr: str
    tail: str
    pid: int
    closed_after_answer: bool = False
    """The CLI was still running ``closing_grace`` after its final answer and the
    supervisor ended it: its answer stands, its exit status is the supervisor's doing."""


def overdue(
    clocks: Clocks, limits: Limits, now: float, in_flight: bool = False
) -> tuple[Classification, str] | None:
    """Which clock, if any, says the run must be stopped now (none once it has answered)."""
    if clocks.answered is not None:
        return None
    if now >= limits.deadline:
        return Classification.TIMED_OUT, "maximum runtime reached"
    clock, limit = stall_clock(limits, in_flight)
    if now - quiet_since(clocks) >= limit:
        quiet = round(now - clocks.last_event)
        what = "with a tool call in flight" if clock == TOOL else "and no tool call in flight"
        idle = f" and its processes idle for {round(now - quiet_since(clocks))}s" if (
            limits.busy_cpu
        ) else ""
        return Classification.STALLED, f"no meaningful event for {quiet}s {what}{idle}"
    return None


def lingering(clocks: Clocks, limits: Limits, now: float) -> str | None:
    """Why a CLI that has answered is to be ended now, if it is (its answer stands)."""
    if clocks.answered is None or now - clocks.answered < limits.closing_grace:
        return None
    return f"still running {limits.closing_grace:g}s after its final answer"


def _next_wake(clocks: Clocks, limits: Limits, now: float, in_flight: bool) -> float:
    if clocks.answered is not None:
        due = clocks.answered + limits.closing_grace
    else:
        due = min(limits.deadline, quiet_since(clocks) + stall_clock(limits, in_flight)[1])
    return max(0.0, min(limits.tick, due - now))


class _Heartbeat:
    """Renews the lease every ``heartbeat_interval`` on its own thread, beside the pipe loop.

    A renewal waits on the board (at most the board's wait budget, board/retry.py).
    In the pipe loop that wait would stop the CLI's output from being read and
    would age the stall clock; here it only delays the next renewal. The loop
    looks at ``lost`` on every turn.
    """

    def __init__(
        self,
        renew: Callable[[], bool],
        interval: float,
        clocks: Clocks,
        report: Callable[[], None],
    ) -> None:
        self.lost = threading.Event()
        self._renew = renew
        self._interval = interval
        self._clocks = clocks
        self._report = report
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            self._clocks.last_heartbeat = time.monotonic()
            try:
                alive = self._renew()
            except Exception:  # noqa: BLE001 - the run stops as lease-lost; nothing is hidden
                log.exception("heartbeat failed; treating the lease as lost")
                alive = False
            if not alive:
                self.lost.set()
                return
            self._report()


def _widen(pipe_fd: int) -> None:
    try:
        fcntl.fcntl(pipe_fd, fcntl.F_SETPIPE_SZ, STDOUT_PIPE_SIZE)
    except OSError as error:
        # Safe to go on: the size is only a speed hint (limits: fs.pipe-max-size and
        # the user's pipe pages), and the default pipe carries the same bytes.
        log.debug("stdout pipe left at its default size: %s", error)


class _Prompt:
    """The prompt on its way into the CLI's stdin, written as the pipe takes it.

    Fed from the same selector loop that reads the output, so a CLI that reads its
    prompt slowly (or never) costs no thread and blocks nothing.
    """

    def __init__(self, pipe: IO[bytes], data: bytes) -> None:
        self.fd = pipe.fileno()
        self._pipe = pipe
        self._left = memoryview(data)
        os.set_blocking(self.fd, False)

    @property
    def done(self) -> bool:
        return not self._left

    def feed(self) -> None:
        """Write what the pipe takes now (the caller closes stdin once ``done``)."""
        try:
            self._left = self._left[os.write(self.fd, self._left[:PIPE_CHUNK]) :]
        except BlockingIOError:
            return
        except BrokenPipeError:
            log.info("CLI closed stdin before reading the whole prompt; its exit status tells why")
            self._left = self._left[:0]

    def close(self) -> None:
        """End of input for the CLI; safe to call again."""
        try:
            self._pipe.close()
        except BrokenPipeError:
            log.debug("stdin already closed by the CLI")


@dataclass(frozen=True)
class _Pipes:
    """The CLI's output pipes: which one is stdout (its events), and a line splitter
    for each."""

    stdout_fd: int
    splitters: dict[int, LineSplitter]


@dataclass
class _Reading:
    """Where one read loop stands: what stopped the CLI, whether it was closed after its
    answer, when it exited, when the loop stops waiting for the pipes, and when the
    process tree was last refreshed."""

    stopped: tuple[Classification, str] | None = None
    closed: bool = False
    exited_at: float | None = None
    give_up_at: float | None = None
    refreshed: float = 0.0

    @property
    def running(self) -> bool:
        return self.stopped is None and not self.closed and self.exited_at is None

    def over(self, now: float, linger: float) -> bool:
        """Whether the CLI's tree may be ended: stopped, closed, or exited and lingering."""
        lingered = self.exited_at is not None and now - self.exited_at > linger
        return bool(self.stopped or self.closed or lingered)


def _register(selector: selectors.BaseSelector, pipes: _Pipes, prompt: _Prompt) -> None:
    """Watch both output pipes (non-blocking, stdout widened) and, while the prompt is
    not fully written, the CLI's stdin."""
    for fd in pipes.splitters:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    _widen(pipes.stdout_fd)
    prompt.feed()
    if prompt.done:
        prompt.close()
    else:
        selector.register(prompt.fd, selectors.EVENT_WRITE)


class Supervisor:
    """One process run: spawn, stream, enforce limits, always leave no tree behind."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: bytes,
        task_log: TaskLog,
        limits: Limits,
        on_event: Callable[[dict[str, Any]], bool],
        heartbeat: Callable[[], bool],
        cancel: threading.Event | None = None,
        run_as: str | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        answered: Callable[[], bool] | None = None,
        gave_up: Callable[[], tuple[Classification, str] | None] | None = None,
        in_flight: Callable[[], bool] | None = None,
        on_stderr: Callable[[str], None] | None = None,
    ) -> None:
        self._argv = argv
        self._cwd = cwd
        self._env = env
        self._stdin = stdin
        self._log = task_log
        self._limits = limits
        self._on_event = on_event
        self._heartbeat = heartbeat
        self._cancel = cancel
        self._run_as = run_as
        self._on_progress = on_progress
        self._answered = answered
        self._gave_up = gave_up  # the CLI said the attempt is over, though it runs on
        self._in_flight = in_flight  # one of the CLI's tool calls has begun and not ended
        self._on_stderr = on_stderr  # the adapter reads what only its CLI's stderr says
        self._tail = Tail()
        self._stderr = Tail(limit=16 * 1024)

    def run(self) -> Ended:
        tree = launch(
            self._argv,
            env=self._env,
            run_as=self._run_as,
            cwd=self._cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        process = tree.root
        assert process.stdin and process.stdout and process.stderr
        prompt = _Prompt(process.stdin, self._stdin)
        stopped: tuple[Classification, str] | None = None
        closed = False
        try:
            stopped, closed = self._stream(process, tree, prompt)
        finally:
            prompt.close()
            tree.kill(self._limits.kill_grace)
            self._log.flush()
        status = process.returncode
        return Ended(
            exit_status=status if status is None or status >= 0 else None,
            signal=-status if status is not None and status < 0 else None,
            stopped=stopped[0] if stopped else None,
            stop_reason=stopped[1] if stopped else "",
            stderr=self._stderr.text(),
            tail=self._tail.text(),
            pid=process.pid,
            closed_after_answer=closed,
        )

    def _stream(
        self, process: subprocess.Popen[bytes], tree: ProcessTree, prompt: _Prompt
    ) -> tuple[tuple[Classification, str] | None, bool]:
        """Read until both pipes end; what stopped the CLI, and whether it was closed
        after its final answer."""
        assert process.stdout and process.stderr
        now = time.monotonic()
        clocks = Clocks(started=now, last_event=now, last_heartbeat=now, cpu_read_at=now)
        clocks.cpu_seconds = tree.cpu_seconds() if self._limits.busy_cpu else None
        self._report(clocks, process.pid)
        stdout_fd, stderr_fd = process.stdout.fileno(), process.stderr.fileno()
        pipes = _Pipes(stdout_fd, {stdout_fd: LineSplitter(), stderr_fd: LineSplitter()})
        heartbeat = _Heartbeat(
            self._heartbeat,
            self._limits.heartbeat_interval,
            clocks,
            lambda: self._report(clocks, None),
        )
        with selectors.DefaultSelector() as selector, heartbeat:
            _register(selector, pipes, prompt)
            reading = _Reading()
            while selector.get_map():
                now = time.monotonic()
                if reading.give_up_at is not None and now > reading.give_up_at:
                    self._log.note("pipes still open after the tree was killed; stop reading")
                    break
                self._watch(reading, process, tree, clocks, now, heartbeat.lost)
                running = reading.running
                wait = (
                    _next_wake(clocks, self._limits, now, self._tool_in_flight())
                    if running
                    else self._limits.tick
                )
                self._read_ready(selector, wait, prompt, pipes, clocks)
                self._log.flush()
                if running and now - reading.refreshed >= self._limits.tick:
                    # Descendants are tracked as they appear, at most once a tick; orphans
                    # of ones that died in between are re-parented to us and adopted by
                    # their token when the tree is killed.
                    tree.refresh()
                    reading.refreshed = now
            if reading.running:
                reading.stopped, reading.closed = self._await_exit(
                    process, clocks, heartbeat.lost, tree
                )
        return reading.stopped, reading.closed

    def _watch(
        self,
        reading: _Reading,
        process: subprocess.Popen[bytes],
        tree: ProcessTree,
        clocks: Clocks,
        now: float,
        lease_lost: threading.Event,
    ) -> None:
        """One look at the CLI: has it exited, has a limit stopped it; once it is over
        (stopped, closed after its answer, or exited and lingering past ``linger``) its
        tree is killed and the pipes get ``linger`` more to drain."""
        if reading.exited_at is None and process.poll() is not None:
            reading.exited_at = now
        if reading.running:
            reading.stopped, reading.closed = self._check_all(clocks, now, lease_lost, tree)
        if reading.give_up_at is None and reading.over(now, self._limits.linger):
            tree.kill(self._limits.kill_grace)
            reading.give_up_at = time.monotonic() + self._limits.linger

    def _read_ready(
        self,
        selector: selectors.BaseSelector,
        wait: float,
        prompt: _Prompt,
        pipes: _Pipes,
        clocks: Clocks,
    ) -> None:
        """Wait up to ``wait`` for the pipes; feed the prompt, hand each line read on."""
        for key, _ in selector.select(wait):
            fd = int(key.fd)
            if fd == prompt.fd:
                prompt.feed()
                if prompt.done:
                    selector.unregister(fd)
                    prompt.close()
                continue
            data = os.read(fd, READ_SIZE)
            if not data:
                selector.unregister(fd)
                lines = pipes.splitters[fd].finish()
            else:
                lines = pipes.splitters[fd].feed(data)
            self._lines(lines, fd == pipes.stdout_fd, clocks)

    def _await_exit(
        self,
        process: subprocess.Popen[bytes],
        clocks: Clocks,
        lease_lost: threading.Event,
        tree: ProcessTree,
    ) -> tuple[tuple[Classification, str] | None, bool]:
        """Both pipes reached end-of-output but the CLI has not exited: wait for it.

        End-of-output is not death: a CLI may print its answer, close stdout and stderr,
        then exit 0 a moment later, and that answer counts. The limits still apply (the
        stall clock, the lease, the runtime, a cancel, the closing grace), checked once
        a tick.
        """
        while process.poll() is None:
            stopped, closed = self._check_all(clocks, time.monotonic(), lease_lost, tree)
            if stopped or closed:
                return stopped, closed
            try:
                process.wait(timeout=self._limits.tick)
            except subprocess.TimeoutExpired:
                continue
        return None, False

    def _check_all(
        self, clocks: Clocks, now: float, lease_lost: threading.Event, tree: ProcessTree
    ) -> tuple[tuple[Classification, str] | None, bool]:
        """Whether the CLI must be ended now: stopped (a limit, the lease, a cancel), or
        closed after its final answer (the answer stands). Says why in the task log."""
        self._sample_cpu(clocks, now, tree)
        stopped = self._check(clocks, now, lease_lost)
        if stopped:
            self._log.note(f"stopping: {stopped[1]}")
            return stopped, False
        closing = self._closing(clocks, now)
        if closing:
            self._log.note(f"ending the CLI, its answer kept: {closing}")
            return None, True
        return None, False

    def _check(
        self, clocks: Clocks, now: float, lease_lost: threading.Event
    ) -> tuple[Classification, str] | None:
        if self._cancelled() and clocks.answered is None:
            return Classification.CANCELLED, "cancelled by runner shutdown"
        if lease_lost.is_set():
            return Classification.LEASE_LOST, "lease lost (heartbeat refused)"
        if self._gave_up is not None and (said := self._gave_up()) is not None:
            return said
        return overdue(clocks, self._limits, now, self._tool_in_flight())

    def _tool_in_flight(self) -> bool:
        return self._in_flight is not None and self._in_flight()

    def _sample_cpu(self, clocks: Clocks, now: float, tree: ProcessTree) -> None:
        """Every ``cpu_interval``, read the attempt's CPU time: more than ``busy_cpu`` per
        second since the last reading counts as a sign of work (``last_busy``)."""
        limits = self._limits
        if not limits.busy_cpu or now - clocks.cpu_read_at < limits.cpu_interval:
            return
        reading = tree.cpu_seconds()
        if busy(clocks.cpu_seconds, reading, now - clocks.cpu_read_at, limits.busy_cpu):
            if clocks.last_busy <= clocks.last_event:
                self._log.note("quiet, but its processes are using CPU: still working")
            clocks.last_busy = now
        clocks.cpu_seconds, clocks.cpu_read_at = reading, now

    def _closing(self, clocks: Clocks, now: float) -> str | None:
        """After the final answer a cancel needs no grace: the answer is all there is."""
        if clocks.answered is not None and self._cancelled():
            return "the runner is stopping"
        return lingering(clocks, self._limits, now)

    def _cancelled(self) -> bool:
        return self._cancel is not None and self._cancel.is_set()

    def _report(self, clocks: Clocks, pid: int | None) -> None:
        if self._on_progress is not None:
            clock, limit = stall_clock(self._limits, self._tool_in_flight())
            self._on_progress(
                Progress(
                    clocks.started,
                    clocks.last_heartbeat,
                    clocks.last_event,
                    pid,
                    clock=clock,
                    stall_limit=limit,
                    last_busy=clocks.last_busy or None,
                )
            )

    def _lines(self, lines: list[bytes], from_stdout: bool, clocks: Clocks) -> None:
        """One read's worth of complete lines: tail, task log, then their events in order."""
        self._tail.extend(lines)
        if not from_stdout:
            self._stderr.extend(lines)
            for line in lines:
                self._log.write_line(line, b"[stderr] ")
                if self._on_stderr is not None:
                    self._on_stderr(line.decode("utf-8", "replace"))
            return
        self._log.write_lines(lines)
        meaningful = False
        for line in lines:
            meaningful = self._meaningful(line) or meaningful
        if meaningful:
            clocks.last_event = time.monotonic()
            # ``status`` shows the last event as it happens, not at the next heartbeat.
            self._report(clocks, None)
        if clocks.answered is None and self._answered is not None and self._answered():
            clocks.answered = time.monotonic()
            self._log.note(
                f"final answer received; the CLI has {self._limits.closing_grace:g}s to exit"
            )

    def _meaningful(self, line: bytes) -> bool:
        if not line.startswith(b"{"):
            return False
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        return isinstance(event, dict) and self._on_event(event)
