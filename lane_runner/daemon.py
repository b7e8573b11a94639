"""The daemon: signals, wake-ups, claims and worker reaping in one place (docs/ARCHITECTURE.md §6).

Shaped like gunicorn's arbiter. The main thread owns the loop and every board
claim; worker threads each carry one run (``RunExecutor``) and wake the loop
when they finish. Signal handlers only set flags and wake the loop.

The loop sleeps on one event. Workers set it when they finish, signal handlers
when they arrive, and a watcher thread when any board changes: it blocks in the
store's ``wait_for_change`` (inotify for SQLite, LISTEN/NOTIFY for PostgreSQL),
so a new ready task is claimed within milliseconds and an idle daemon sleeps.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import faulthandler
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from lane_runner import config as configuration
from lane_runner import redact
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import Claim
from lane_runner.home import Home
from lane_runner.notifications.dispatch import Dispatcher
from lane_runner.run import cleanup, command, handback, lanereview
from lane_runner.run.executor import RunEnd, RunExecutor, RunReport
from lane_runner.service import (
    admission,
    breaker,
    config_watch,
    gauge,
    logs,
    memory,
    metrics,
    recovery,
    sizing,
    status,
    stopping,
    stuck,
    usable,
)
from lane_runner.service.approvals import approval_for
from lane_runner.service.lock import HomeLock
from lane_runner.service.notify import Notifier
from lane_runner.service.probes import Health
from lane_runner.service.services import Tools, build, preflight
from lane_runner.service.workerpool import WorkerPool

log = logging.getLogger(__name__)

WATCH_SLICE = 1.0  # the board watcher re-checks ``stopping`` this often
CLAIM_SWEEP = 1.0  # claim attempts even without a change: cooldowns end without one
RESCUE_INTERVAL = 30.0  # look for other nodes' expired leases
REPLAY_INTERVAL = 10.0  # retry finalizations left pending by an unavailable board
MAX_SLOTS = 64
#: Workspaces whose filesystems the disk guard watches (the most recently claimed).
WATCHED_WORKSPACES = 32


@dataclass
class Timer:
    interval: float
    due: float = 0.0

    def ready(self, now: float) -> bool:
        if now < self.due:
            return False
        self.restart(now)
        return True

    def restart(self, now: float) -> None:
        self.due = now + self.interval


class Daemon:
    def __init__(
        self,
        cfg: configuration.Config,
        *,
        until: Callable[[Daemon], bool] | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.cfg = cfg
        self.until = until  # stop when this says so (the demo and tests: "all done")
        self.notifier = notifier or Notifier()
        self.wake = threading.Event()
        self.stopping = False
        self.stop_signal: int | None = None
        self.stop_now = False  # a second stop signal: cut the runs short at once
        self.stopping_state: stopping.Stopping | None = None
        self.reload_requested = False
        self.pool = concurrent.futures.ThreadPoolExecutor(MAX_SLOTS, thread_name_prefix="run")
        self.workers: dict[concurrent.futures.Future[RunReport], Claim] = {}
        self.reviews: set[int] = set()  # the workers' runs that are a host's review runs
        self.review_rests = lanereview.Rests()  # reviews just handed back without a verdict
        self.runs_finished = 0
        self.board_cursor = 0
        self.timers = {
            "claim": Timer(CLAIM_SWEEP),
            # A dead node's runs are back in ready within lease_ttl + one heartbeat interval.
            "rescue": Timer(min(RESCUE_INTERVAL, cfg.heartbeat_interval, cfg.lease_ttl / 4)),
            "replay": Timer(REPLAY_INTERVAL),
            "gc": Timer(cfg.gc_interval),
            "config": Timer(config_watch.INTERVAL),
        }
        self.config_watch = config_watch.ConfigWatch.of(cfg.home)
        self.last_watchdog = 0.0
        self.pending_finalizations = 0
        self.started_at = time.time()
        self.publisher = status.Publisher(Home(cfg.home).status_file)
        self.metrics_server: metrics.Server | None = None
        self.health = Health(cfg.health_timeout)  # what /healthz and /readyz answer
        # What the claim guards read last, and what ``admission.admit`` made of it: status
        # and the metrics show both.
        self.readings = admission.Readings()
        self.decision = admission.Decision()
        self.elevated_start = -math.inf  # when the last run started under elevated pressure
        self.workspaces: dict[str, None] = {}  # the repositories claims worked in, in order
        self.broken_seen: set[str] = set()  # scopes the breaker gauge has shown
        self.concurrency = self._concurrency(cfg)
        self.stuck = stuck.Watch()  # stuck-warning kinds commented, per run
        self.sweeping: concurrent.futures.Future[None] | None = None  # cleanup (run/cleanup.py)

    # -- life cycle -------------------------------------------------------------
    def serve(self) -> int:
        # A fault in a C extension, and SIGUSR1 (stopping nothing), print every thread's stack.
        faulthandler.enable()
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        binaries = preflight(self.cfg)  # a bad configuration leaves the home untouched
        usable.require(binaries)  # no CLI at all: every claim would end blocked at once
        home_lock = HomeLock(Home(self.cfg.home).lock_file, "daemon")
        with home_lock:
            self.services = build(self.cfg, binaries)
            previous = self._install_signals()
            try:
                return self._serve()
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
                self.services.close()

    def _serve(self) -> int:
        self._serve_metrics()  # before recovery: a long replay is "alive, not ready"
        try:
            self._recover()
            self.dispatcher = Dispatcher(
                self.services.store, self.services.node, lambda: self.services.cfg,
                self.services.breaker.trips,
            )
            self.dispatcher.start()  # its own thread: a send never waits on the loop
            watcher = threading.Thread(target=self._watch_boards, name="board-watch", daemon=True)
            watcher.start()
            self.health.serving()
            self.notifier.ready(self._status_line())
            try:
                while not self.stopping:
                    self._tick()
                    if self.until is not None and self.until(self):
                        self.stopping = True
                        break
                    self._wait()
            finally:
                self._shutdown()
                watcher.join(2 * WATCH_SLICE)  # out of the store before it closes: no segfault
        finally:
            if self.metrics_server is not None:
                self.metrics_server.close()
        return 0

    def _recover(self) -> None:
        result = recovery.recover(self.services)
        metrics.recovered(result.journal)
        self.pending_finalizations = result.pending_left
        log.info(
            "recovered: %d reclaimed, %d finalizations pending",
            len(result.reclaimed),
            result.pending_left,
        )

    def _install_signals(self) -> dict[int, Any]:
        """Install the daemon's handlers; returns the previous ones for ``serve`` to restore."""
        handlers = {
            signal.SIGTERM: self._on_stop,
            signal.SIGINT: self._on_stop,
            signal.SIGHUP: self._on_reload,
        }
        return {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}

    def _on_stop(self, signum: int, frame: object) -> None:
        """Only set flags: a handler that logged could deadlock on a lock the
        interrupted thread holds. The loop says what happened once it wakes.
        A second stop signal stops now (``service/stopping.py``)."""
        if self.stop_signal is None:
            self.stop_signal = signum
        else:
            self.stop_now = True
        self.stopping = True
        self.wake.set()

    def _on_reload(self, signum: int, frame: object) -> None:
        self.reload_requested = True
        self.wake.set()

    # -- one turn of the loop ---------------------------------------------------
    def _tick(self) -> None:
        now = time.monotonic()
        healthy = True
        try:
            self._reap()
            if self.timers["config"].ready(now) and self.config_watch.changed():
                log.info("%s changed: reloading the configuration", self.config_watch.path)
                self.reload_requested = True
            if self.reload_requested:
                self._reload()
            if self.timers["replay"].ready(now) and self.pending_finalizations:
                self._replay()
            if self.timers["rescue"].ready(now):
                recovery.rescue_expired(self.services, self._active_run_ids())
            if self.timers["gc"].ready(now):
                self._sweep()
            self._claim()
            self._watch(time.time())
            # Every tick claims; the sweep timer only bounds the next sleep, so re-arm it.
            self.timers["claim"].restart(now)
            self._publish(now)
        except Exception:  # noqa: BLE001 - the loop outlives any one failure; the watchdog notices
            log.exception("daemon loop iteration failed; retrying")
            healthy = False
        self._notify(healthy, now)

    def _reap(self) -> None:
        for future in [f for f in self.workers if f.done()]:
            claim = self.workers.pop(future)
            self.services.worker_pool.release(claim.run.id)  # its user is free again
            reviewed = claim.run.id in self.reviews
            self.reviews.discard(claim.run.id)
            self.services.activity.finish(claim.run.id)
            self.stuck.forget(claim.run.id)
            error = future.exception()
            if reviewed and (error is not None or future.result().ended is RunEnd.COOLDOWN):
                self.review_rests.rest(claim.task, self.services.cfg.cooldown_base)
            if error is not None:
                log.error(
                    "run %s of %s/%s crashed: %r",
                    claim.run.id,
                    claim.task.board,
                    claim.task.id,
                    error,
                    exc_info=error,
                )
                if handback.crashed(self.services, claim, repr(error)):
                    self.pending_finalizations += 1
                continue
            report = future.result()
            metrics.run_ended(report.board, report.ended, time.time() - claim.run.claimed_at)
            self.runs_finished += 1
            if report.ended is RunEnd.PENDING:
                self.pending_finalizations += 1
            releasing = self.stopping and self.services.cfg.release_on_stop
            if report.ended is RunEnd.ABANDON and releasing:
                handback.release(self.services, claim, report)

    def _replay(self) -> None:
        report = self.services.journal.recover(self.services.commit, self.services.make_retryable)
        metrics.recovered(report)
        self.pending_finalizations = recovery.RecoveryResult(report).pending_left

    def _sweep(self) -> None:
        """Cleanup and the journal's retention (``run/cleanup.py``), on a pool thread: git
        and hooks take their time, the loop may not. One sweep at a time; the shutdown
        waits for it (it stops between tasks) before letting go of the home."""
        if self.sweeping is not None and not self.sweeping.done():
            return
        self.sweeping = self.pool.submit(self._run_sweep)

    def _run_sweep(self) -> None:
        try:
            with command.supervised(self.services.supervision()):
                report = cleanup.sweep(
                    self.services, cleanup.retention(self.services.cfg), time.time(),
                    lambda: self.stopping,
                )
        except command.Cancelled as stopped:
            log.info("cleanup sweep cut short (%s); the next start sweeps again", stopped)
            return
        except Exception:  # noqa: BLE001 - the next sweep tries again; the loop goes on
            log.exception("cleanup sweep failed; the next one tries again")
            return
        report.log()

    def _claim(self) -> None:
        """One claim pass: read what the guards look at, ask ``admission.admit`` what may
        be claimed, and claim it, round the open boards from where the last pass ended."""
        self.readings, self.decision = self._admission()
        free, boards = self.decision.claims, list(self.decision.boards)
        started = time.monotonic()
        misses = 0
        while free > 0 and boards and misses < len(boards):
            at = self.board_cursor % len(boards)
            self.board_cursor += 1
            claim = self._claim_from(boards[at])
            if claim is None:
                misses += 1
                continue
            misses = 0
            free -= 1
            if self.decision.pressure == memory.ELEVATED:
                self.elevated_start = started
            boards[at] = boards[at].probed(claim.task.workspace)
            self._submit(claim)

    def _admission(self) -> tuple[admission.Readings, admission.Decision]:
        """The readings and the decision of this pass. The boards are read only when the
        node itself would claim (their reads cost each board a query)."""
        guards = admission.Guards.of(self.services.cfg)
        readings = gauge.node(
            self.services,
            free=min(self.concurrency, MAX_SLOTS) - len(self.workers),
            stopping=self.stopping,
            busy=len(self.workers),
            workspaces=list(self.workspaces),
            since_elevated=time.monotonic() - self.elevated_start,
        )
        decision = admission.admit(readings, guards)
        if decision.claims > 0:
            readings = dataclasses.replace(readings, boards=gauge.boards(self.services))
            decision = admission.admit(readings, guards)
        return readings, decision

    @staticmethod
    def _concurrency(cfg: configuration.Config) -> int:
        """The slots: ``concurrency``, or with 0 what this runner's cgroup (else the
        node) has room for (``service/sizing.py``), never more than the worker pool."""
        slots = int(cfg.concurrency) or sizing.derived_concurrency(
            sizing.read_limits(), cfg.memory_per_run_mb)
        return WorkerPool(cfg.worker_users).cap(slots)

    def _watch(self, now: float) -> None:
        """Runs nearing a hard limit flagged and commented (``service/stuck.py``); the
        breaker's and the operator controls' gauges."""
        counts = self.stuck.turn(self.services, now)
        trips = set(self.services.breaker.trips())
        metrics.broken(trips, self.broken_seen)
        self.broken_seen |= trips
        metrics.controls(
            paused=self.readings.paused is not None,
            hold=self.decision.hold.kind if self.decision.hold else None,
            **self._slots(),
            stuck=counts,
        )

    def _slots(self) -> dict[str, Any]:
        snapshot = self.services.slots.snapshot()
        return {"providers": snapshot["providers"], "waiting": snapshot["waiting"]}

    def _claim_from(self, board: admission.Claimable) -> Claim | None:
        """A claim on ``board``, or None; a board that is unavailable rests
        (``service/resting``). A claim that is a probe of the storm breaker's (of the
        board, or of a workspace of it) begins the probe: one claim per probe."""
        now = time.time()
        slug = board.slug
        on_board = breaker.scope(breaker.BOARD, slug)
        if board.probe and not self.services.breaker.admits(on_board, now):
            return None
        try:
            with self.services.resting.use(slug):
                review = lanereview.claim(self.services, slug, self.review_rests,
                                          {c.task.id for c in self.workers.values()})
                if review is not None:
                    self.reviews.add(review.run.id)
                    return review
                claim = self.services.store.board(slug).claim(
                    self.services.node,
                    self.services.cfg.lease_ttl,
                    self.services.cfg.default_assignee,
                    board.skip,
                    approval_for(self.services.cfg, slug),
                )
        except BoardUnavailable as error:
            log.debug("board %s skipped: %s", slug, error)
            return None
        if claim is not None and claim.task.workspace in board.probing:
            where = breaker.workspace_scope(slug, claim.task.workspace)
            self.services.breaker.admits(where, now)  # its probe, due: started now
        return claim

    def _submit(self, claim: Claim) -> None:
        task, cfg = claim.task, self.services.worker_pool.for_run(self.services.cfg, claim.run.id)
        log.info(
            "claimed %s/%s run %s",
            task.board,
            task.id,
            claim.run.id,
            extra=logs.about(task.board, task.id, claim.run.id),
        )
        metrics.CLAIMS.labels(task.board).inc()
        self._watch_workspace(task.workspace)
        self.services.activity.start(
            task.board,
            task.id,
            claim.run.id,
            str(self.services.home.log_file(task.board, task.id)),
            task.max_runtime or cfg.max_runtime,
        )
        # The router, judge and CLIs of ``cfg``, held to the run's end: a reload meanwhile
        # changes them for the claims after it (docs/configuration.md).
        future = self.pool.submit(self._execute, claim, cfg, self.services.hold())
        self.workers[future] = claim
        future.add_done_callback(lambda _: self.wake.set())

    def _watch_workspace(self, workspace: str | None) -> None:
        """Remember a claimed task's repository for the disk guard (the latest few)."""
        if not workspace or not os.path.isabs(workspace) or not os.path.isdir(workspace):
            return
        self.workspaces.pop(workspace, None)
        self.workspaces[workspace] = None
        while len(self.workspaces) > WATCHED_WORKSPACES:
            del self.workspaces[next(iter(self.workspaces))]

    def _execute(self, claim: Claim, cfg: configuration.Config, tools: Tools) -> RunReport:
        try:
            with (
                logs.run_context(claim.task.board, claim.task.id, claim.run.id),
                command.supervised(self.services.supervision()),
            ):
                if claim.run.id in self.reviews:  # a host's review run: added before submit
                    return lanereview.serve(self.services, claim, cfg, tools)
                return RunExecutor(self.services, claim, cfg, tools).execute()
        finally:
            self.services.let_go(tools)

    def _active_run_ids(self) -> set[int]:
        return {claim.run.id for claim in self.workers.values()}

    def _reload(self) -> None:
        self.reload_requested = False
        try:
            cfg, waiting = self.cfg.reloaded_as(configuration.load(self.cfg.home))
            self.services.reload(cfg)
        except Exception as error:  # noqa: BLE001 - a bad edit must not kill a running daemon
            log.error("config reload failed, keeping the old configuration: %s", error)
            self.config_watch.refused(redact.shown(str(error)))
            return
        self.config_watch.reloaded(waiting)
        self.cfg = cfg
        self.concurrency = self._concurrency(cfg)
        self.health.timeout = cfg.health_timeout
        log.info("configuration reloaded (concurrency %d)", self.concurrency)
        if waiting:
            log.warning("%s changed: the new value takes effect at restart", ", ".join(waiting))

    def _wait(self) -> None:
        """Sleep until a worker finishes, a signal arrives, a board changes, or a timer is due."""
        deadline = min(timer.due for timer in self.timers.values())
        self.wake.wait(max(0.0, deadline - time.monotonic()))
        self.wake.clear()

    def _watch_boards(self) -> None:
        """Turn board changes (by anyone: the CLI, other runners, our own writes) into wake-ups."""
        while not self.stopping:
            try:
                if self.services.store.wait_for_change(WATCH_SLICE):
                    self.wake.set()
                    self.dispatcher.wake()
            except Exception:  # noqa: BLE001 - the sweep timer still claims without wake-ups
                log.exception("board watch failed; retrying in %s s", WATCH_SLICE)
                time.sleep(WATCH_SLICE)

    def _notify(self, healthy: bool, now: float) -> None:
        if healthy:
            self.health.turned()
        interval = self.notifier.watchdog_interval
        if interval is not None and healthy and now - self.last_watchdog >= interval:
            self.notifier.watchdog()
            self.last_watchdog = now
        self.notifier.status(self._status_line())

    def _serve_metrics(self) -> None:
        port, address = self.cfg.metrics_port, self.cfg.metrics_address
        if not port:
            return
        try:
            self.metrics_server = metrics.serve(port, address, self.health)
        except OSError as error:
            # Safe to go on: metrics are opt-in observability, the work matters more.
            log.error(
                "metrics port %s:%s unusable, serving without metrics: %s", address, port, error
            )
            return
        shown = f"[{address}]" if ":" in address else address
        log.info("metrics, /healthz and /readyz on http://%s:%d", shown, self.metrics_server.port)

    def _publish(self, now: float) -> None:
        """Gauges every turn; ``status.json`` when it changed, at most once a second."""
        metrics.load(len(self.workers), self.pending_finalizations)
        if not self.publisher.due(now):
            return
        self.publisher.publish(
            status.document(
                started_at=self.started_at,
                node=self.services.node,
                concurrency=self.concurrency,
                active=self.services.activity.snapshot(),
                runs_finished=self.runs_finished,
                pending_finalizations=self.pending_finalizations,
                metrics_port=self.metrics_server.port if self.metrics_server else None,
                metrics_address=self.cfg.metrics_address if self.metrics_server else None,
                paused=self.readings.paused.to_dict() if self.readings.paused else None,
                hold=self.decision.hold.to_dict() if self.decision.hold else None,
                providers=self._slots(),
                memory=self._memory(),
                disk=[asdict(space) for space in self.readings.disk],
                config=self.config_watch.to_dict(),
                stopping=self.stopping_state.to_dict() if self.stopping_state else None,
            ),
            now,
        )

    def _memory(self) -> dict[str, Any] | None:
        """The memory read last and its pressure, for status."""
        reading = self.readings.memory
        return None if reading is None else {**asdict(reading), "pressure": self.decision.pressure}

    def _status_line(self) -> str:
        hold = self.decision.hold
        held = f"not claiming ({hold.reason}), " if hold else ""
        return (
            held + f"{len(self.workers)}/{self.concurrency} slots busy, "
            f"{self.runs_finished} runs finished, "
            f"{self.pending_finalizations} finalizations pending"
        )

    # -- shutdown ---------------------------------------------------------------
    def _shutdown(self) -> None:
        """Stop claiming; give running work a grace period, then kill the process trees.

        Runs cut short stay claimed: the next start reclaims them and the provider
        sessions resume. Accepted results are already in the journal. Returns only once
        every run's thread has ended, so every git command and CLI it started is gone:
        the home lock is released after this, and a ``recover`` that takes it must not
        reclaim a run whose git is still running.
        """
        self.stopping = True
        self.health.stopping()
        grace = self.services.cfg.shutdown_grace
        name = stopping.signal_name(self.stop_signal)
        self.stopping_state = stopping.Stopping(name, time.time(), time.time() + grace)
        log.info(stopping.waiting_words(name, len(self.workers), grace))
        self.notifier.stopping(f"stopping; {len(self.workers)} runs in flight")
        running = self._finish_runs(grace)
        if running and self.stop_now:
            log.warning(stopping.now_words(name, len(running)))
        elif running:
            # Every CLI, git command and hook they started (``run/command.py``).
            log.info("grace period over: terminating %d process trees", len(running))
        if running:
            self.services.cancel_all()
            running = list(concurrent.futures.wait(running, timeout=max(10.0, grace))[1])
        if running:
            log.warning(
                "%d runs still wait for a git command or their CLI to end; the home stays "
                "locked until they do",
                len(running),
            )
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._reap()
        self.dispatcher.stop()  # after the runs: their endings' notifications have a pass
        self.publisher.withdraw()

    def _finish_runs(self, grace: float) -> list[concurrent.futures.Future[Any]]:
        """Wait up to ``grace`` s for the runs (and a cleanup sweep: its hooks) to end, or
        until a second stop signal; what is still going. ``status.json`` follows the
        runs as they finish."""
        deadline = time.monotonic() + grace
        while True:
            now = time.monotonic()
            self._reap()
            self._publish(now)
            threads: list[concurrent.futures.Future[Any]] = [*self.workers]
            if self.sweeping is not None:
                threads.append(self.sweeping)
            running = [future for future in threads if not future.done()]
            if not running or now >= deadline or self.stop_now:
                if self.stop_now and self.stopping_state is not None:
                    self.stopping_state = dataclasses.replace(self.stopping_state, now=True)
                    self._publish(now)
                return running
            # A run ending and a signal both set ``wake``; a second bounds the wait so
            # the status published stays fresh.
            self.wake.wait(min(deadline - now, status.PUBLISH_INTERVAL))
            self.wake.clear()
