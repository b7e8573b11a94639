"""Carry one claimed run from route to result (docs/ARCHITECTURE.md §1).

The executor owns one run at a time: lane state, workspace, context, route,
provider attempts under the supervisor, the goal loop, and the hand-over of an
accepted result to the journal. Decisions come from ``decide``; this module
only carries them out, so each step here is an effect with a reason.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from journal import Document, FinalizeOutcome
from journal import names as journal_names
from lane_runner import clock, display, files, redact
from lane_runner.board import rules
from lane_runner.board.base import Board, BoardUnavailable, HostedBoard, WorkspaceUnusable
from lane_runner.board.model import BlockKind, Claim, Outcome, Run, StopRequest, Task
from lane_runner.errors import NotFound
from lane_runner.names import AUTO_ASSIGNEE, PROVIDERS
from lane_runner.providers import (
    Attempt,
    Classification,
    ProviderRequest,
    UsageReport,
    run_attempt,
    worker_environment,
)
from lane_runner.router import Route, RoutingError, health
from lane_runner.router.judge import structural_verdict
from lane_runner.run import (
    branchhead,
    budget,
    command,
    cycling,
    decide,
    delivery,
    fit,
    followup,
    git,
    hooks,
    lanestate,
    plan,
    undelivered,
    usage_note,
    workspace,
)
from lane_runner.run import context as contexts
from lane_runner.service import breaker, disk, ledger, leftovers, logs, metrics, usage_share
from lane_runner.service.services import Services

log = logging.getLogger(__name__)
AUTHOR = "lane-runner"
T = TypeVar("T")
#: The least wait between two tries of a run's ending on an unavailable board; the
#: board's rest (``service/resting.py``) usually sets a longer one.
RETRY_PAUSE = 0.5
#: Steps that move away from a provider without capacity: when every provider is under
#: a usage limit with a known reset, the run waits for the reset instead.
WAITS_FOR_CAPACITY = frozenset({decide.Step.FALLBACK, decide.Step.COOLDOWN})


def goal_words(turn: int, goal_turns: int) -> str:
    """``, goal turn 2/4`` in what people read; nothing for a task of one turn, whose
    attempts are no turns of a goal however many runs it took."""
    return f", goal turn {turn}/{goal_turns}" if goal_turns > 1 else ""


class RunEnd(enum.StrEnum):
    """How a run ended, as the daemon and the metrics see it (one vocabulary).

    The journal's outcomes keep their names (``committed``, ``conflict``, ``absent``,
    ``invalid``, ``pending``); the rest say what the board was told.
    """

    COMMITTED = "committed"
    CONFLICT = "conflict"
    ABSENT = "absent"
    INVALID = "invalid"
    PENDING = "pending"  # accepted, waiting in the journal for its board
    BLOCK = "block"
    COOLDOWN = "cooldown"
    RETRY = "retry"  # a counted failure, back to ready
    ABANDON = "abandon"  # left claimed (shutdown, lease lost, board away)
    STOPPED = "stopped"  # an operator's task stop


@dataclass
class RunReport:
    board: str
    task_id: str
    run_id: int
    ended: RunEnd
    reason: str
    provider: str | None = None


class RunExecutor:
    """One claimed run. ``execute()`` says what happened; provider trouble never raises."""

    def __init__(self, services: Services, claim: Claim) -> None:
        self.s = services
        self.task: Task = claim.task
        self.run: Run = claim.run
        self.board: Board = services.store.board(claim.task.board)
        self.lanes_dir = services.home.lane_dir(self.task.board)
        self.state = lanestate.load(self.lanes_dir, self.task.board, self.task.id, self.run.id)
        max_runtime = self.task.max_runtime or services.cfg.max_runtime
        self.deadline = time.monotonic() + max_runtime
        # When the lease runs out, on this node's monotonic clock: the board's stamps are
        # the board's clock (the database's, on PostgreSQL), which this node's may not match.
        self.lease_until = time.monotonic() + self.run.lease_expires_at - self.run.claimed_at
        self.fell_back = False
        self.worktree = self.cwd = Path()  # set once the workspace is prepared (cwd: the CLI's)
        self.branch = workspace.branch_name(self.task.board, self.task.id)  # git's may differ
        self.on_branch = False  # the worktree is ours, on the task's branch (not a hosted one)
        self.held: str | None = None  # the provider whose slot this run holds
        self.turn_begun = False  # a goal turn of this run has begun (a cooldown gives it back)
        self.verdict: dict[str, Any] = {}  # the judge's word on the latest completed answer
        self.started = self.noted_at = time.monotonic()  # noted_at: progress_note_interval
        self.cancel = services.run_cancel(self.run.id)  # shutdown, or an operator's stop
        self.stop: StopRequest | None = None  # the operator's stop, once a heartbeat saw it
        self.over_budget: str | None = None  # why the spend crossed the budget, once it did
        self.unknown_usage = usage_note.Unknown()  # impossible usage figures, to comment on
        # The board's copy of the usage ledger: the task's records and the board's today's,
        # as last read (``_share_usage``); what budgets read with the home's own records.
        self.on_board: list[dict[str, Any]] = []
        cfg = services.cfg
        self.budget = budget.of(
            self.task.max_cost_usd, self.task.max_tokens, cfg.max_cost_usd, cfg.max_tokens,
            cfg.daily_budget_usd, self.task.board,
        )

    # -- the run ----------------------------------------------------------------
    def execute(self) -> RunReport:
        try:
            return self._execute()
        except OSError as error:
            return self._storage_failed(error)
        except BoardUnavailable as error:
            return self._hand_back(error)
        except command.Cancelled as error:
            return self._cut_short(error)
        finally:
            self.s.forget_run(self.run.id)

    def _cut_short(self, error: command.Cancelled) -> RunReport:
        """The shutdown ended a git command or hook of the run: left as a crash leaves it
        (the next start resumes it, or commits a result the journal holds), uncounted."""
        log.info("run %s cut short by the shutdown: %s", self.run.id, error)
        if self.s.holds_result(self.task.board, self.task.id, self.run.id):
            return self._report(RunEnd.PENDING, f"result kept in the journal: {error}")
        return self._report(RunEnd.ABANDON, f"cut short: {error}")

    def _hand_back(self, error: BoardUnavailable) -> RunReport:
        """A board read the run needed failed: back to ready after a short wait, uncounted
        (a board outage is not the task's fault), the provider session kept for resume."""
        log.warning(
            "board unavailable during %s/%s run %s: %s; handing the run back",
            self.task.board,
            self.task.id,
            self.run.id,
            error,
        )
        reason = redact.shown(f"board unavailable: {error}")
        seconds = rules.cooldown(1, self.s.cfg.cooldown_base, self.s.cfg.cooldown_max)
        return self._requeue(reason, reason, seconds)

    def _storage_failed(self, error: OSError) -> RunReport:
        """The home's disk is full or failing: not the task's fault, so not a counted failure.

        Whatever was accepted is either durable in the journal (recovery commits it;
        the run stays claimed) or was never written (the run is retried after a
        cooldown, its provider session kept).
        """
        log.error(
            "state directory error in %s/%s run %s: %s",
            self.task.board,
            self.task.id,
            self.run.id,
            error,
        )
        if self.s.holds_result(self.task.board, self.task.id, self.run.id):
            self._note_waiting_result()
            return self._report(RunEnd.PENDING, f"result kept in the journal despite: {error}")
        return self._cooldown(f"state directory error: {error}", "storage")

    def _execute(self) -> RunReport:
        try:
            prepared = self._workspace()
        except workspace.WorkspaceBusy as error:
            return self._wait_for_workspace(str(error))
        except (workspace.WorkspaceError, WorkspaceUnusable) as error:
            if self.task.workspace is not None:  # none: the operator's slip, not a storm
                self._file_failure(*self._workspace_scopes(), "workspace", str(error))
            return self._block(str(error), BlockKind.CAPABILITY)
        self.worktree, self.cwd = prepared.path, prepared.cwd
        self.branch = prepared.branch or self.branch
        self.on_branch = prepared.branch is not None
        if prepared.taken_over_from is not None:
            self._note(f"took over the worktree an earlier run left at {prepared.taken_over_from}")
        if self.on_branch and self.state.base is None:
            self.state.base = delivery.head(self.worktree, self.s.cfg.worker_user)
        if self._earlier_result_waits() or self._undelivered_on_branch():
            return self._redeliver()
        short = self._no_room()
        if short is not None:
            seconds = rules.cooldown(1, self.s.cfg.cooldown_base, self.s.cfg.cooldown_max)
            return self._requeue(short, redact.shown(short), seconds)
        self._share_usage()
        spent = self._budget_crossed()
        if spent is not None:
            return self._budget_spent(budget.spent_reason(spent, answered=False))
        wait = self._limit_wait()
        if wait is not None:
            return self._park(*wait)
        unfit = self._before_work(prepared)
        if unfit is not None:
            return self._hook_failed(unfit, prepared)
        self.s.breaker.succeeded(*self._workspace_scopes())
        task_context = self._context()
        try:
            route = self._admit(task_context, self._route(task_context))
        except RoutingError as error:
            return self._routing_failed(error)
        if route is None:
            return self._abandon_wait()
        try:
            return self._work(prepared, task_context, route)
        finally:
            self._release()

    def _work(self, prepared: workspace.Workspace, task_context: str, route: Route) -> RunReport:
        worktree = prepared.path
        handoff = self._handoff_for(route.provider, worktree, self._log_tail())
        if handoff:
            self._note(
                f"provider changed at restart: {self.state.provider} -> {route.provider}; "
                f"a handoff of branch {self.branch} is attached"
            )
        if not handoff and prepared.taken_over_from is not None and self.state.provider is None:
            # The earlier attempt ran in another home: this one knows it only by its worktree.
            handoff = self._handoff(worktree, "")
        continuation = contexts.after_failure(self.state.take_retry_reason())
        turn = self.state.goal_turn + 1  # a restarted goal carries on counting
        while True:
            self.state.goal_turn = turn
            self.turn_begun = True
            broken = self._broken(route.provider)
            if broken is not None:
                self._release()
                decision = decide.after_broken(broken, fell_back=self.fell_back)
                if decision.step is decide.Step.COOLDOWN:
                    return self._cooldown(decision.reason, "breaker")
                attempt = Attempt(Classification.UNUSABLE, broken, None, None, None, None, "")
            else:
                prompt = contexts.worker_prompt(task_context, handoff, continuation)
                attempt = self._attempt(route, prompt, prepared.cwd, turn)
                for said in self.unknown_usage.take():
                    self._note(said)
                if self.stop is not None:
                    return self._stopped(self.stop)
                accepted, verdict = self._judge(task_context, attempt, turn)
                decision = decide.after_attempt(
                    attempt.classification,
                    attempt.reason,
                    attempt.structured,
                    accepted=accepted,
                    verdict_reason=verdict,
                    turn=turn,
                    goal_turns=self.task.goal_turns,
                    time_left=self.deadline - time.monotonic() > self.s.cfg.goal_margin,
                    fell_back=self.fell_back,
                )
            if self.over_budget is not None:
                return self._budget_spent(
                    budget.spent_reason(self.over_budget, decision.step is decide.Step.ACCEPT)
                )
            wait = self._limit_wait() if decision.step in WAITS_FOR_CAPACITY else None
            if wait is not None:
                return self._park(*wait)
            log.info(
                "%s/%s run %s%s: %s -> %s (%s)",
                self.task.board,
                self.task.id,
                self.run.id,
                goal_words(turn, self.task.goal_turns),
                attempt.classification.value,
                decision.step.value,
                decision.reason,
            )
            if decision.step is decide.Step.CONTINUE:
                self.state.reject(decision.reason)
                turn += 1
                self._note(
                    f"goal turn {turn}/{self.task.goal_turns}: turn {turn - 1} not accepted "
                    f"({decision.reason})"
                )
                route = self._reroute(task_context, route, decision.reason)
                handoff = self._handoff_for(route.provider, worktree, attempt.tail)
                continuation = (
                    f"Your previous answer was not accepted: {decision.reason}\n"
                    f"Commits on branch {self.branch} so far:\n{self._commit_log() or '(none)'}\n"
                    "Reinspect the workspace, finish the outstanding work and answer again."
                )
                continue
            if decision.step is decide.Step.FALLBACK:
                self._release()
                try:
                    admitted = self._admit(
                        task_context, self._fallback(task_context, route, decision.reason)
                    )
                except RoutingError as error:
                    return self._routing_failed(error)
                if admitted is None:
                    return self._abandon_wait()
                route = admitted
                handoff = self._handoff_for(route.provider, worktree, attempt.tail)
                # A stall is worth knowing for the next provider (a command that hung); a
                # lost login or an exhausted account is not the task's business.
                stalled = attempt.classification is Classification.STALLED
                continuation = contexts.after_failure(attempt.reason if stalled else None)
                continue
            if decision.step is not decide.Step.ABANDON:
                self._hook("after_run", summary=(attempt.structured or {}).get("summary", ""))
            return self._conclude(decision, attempt, route, attempt.classification.value)

    def _reroute(self, task_context: str, current: Route, rejection: str) -> Route:
        """Each goal turn is routed afresh, with the rejection and fresh provider health,
        so a turn that needs a stronger model or another provider gets it; a router that
        cannot answer now leaves the turn on the route it had."""
        context = (
            f"{task_context}\n\nThe previous turn was not accepted: {rejection}\n"
            "Choose a route that can finish and verify the remaining work."
        )
        try:
            return self._route(context)
        except RoutingError as error:
            self._note(
                f"goal turn stays on {current.provider}/{current.model}: "
                f"routing failed: {redact.shown(str(error))}"
            )
            return current

    def _conclude(
        self, decision: decide.Decision, attempt: Attempt, route: Route, classification: str
    ) -> RunReport:
        step = decision.step
        if step is decide.Step.ACCEPT:
            assert attempt.structured is not None
            result = dict(attempt.structured)
            result["artifacts"] = workspace.artifacts(
                self.worktree, result["artifacts"], base=self.cwd
            )
            return self._accept(fit.fitted(result, self.task.board), route)
        if step is decide.Step.ABANDON:
            return self._report(RunEnd.ABANDON, decision.reason, route.provider)
        if step is decide.Step.COOLDOWN:
            return self._cooldown(decision.reason, classification)
        if step is decide.Step.BLOCK:
            assert decision.kind is not None
            return self._block(decision.reason, decision.kind)
        outcome = decision.outcome
        assert outcome is not None
        self.state.progressed()
        self.state.failed(decision.reason)
        self._save_state_if_possible()
        wait = self._backoff() if decision.count_failure else None
        reason = redact.shown(self._waiting(decision.reason, wait))
        # A run out of its runtime says the task is long, not that the provider is broken.
        if decision.count_failure and classification != Classification.TIMED_OUT.value:
            self._file_failure(
                breaker.scope(breaker.PROVIDER, route.provider), None, classification,
                decision.reason,
            )
        return self._end(
            RunEnd.RETRY,
            reason,
            "reclaim",
            lambda: self.board.reclaim(
                self.run.id, reason, outcome, count_failure=decision.count_failure, cooldown=wait
            ),
            route.provider,
        )

    def _backoff(self) -> float | None:
        """Seconds before the task may be claimed again after this counted failure: doubling
        with its failures, capped (``failure_backoff_base``, ``failure_backoff_max``). A task
        that fails at once must not spend its whole budget in seconds, before anything
        that broke around it (a tool, a credential, a network) could come back."""
        cfg = self.s.cfg
        if not cfg.failure_backoff_base:
            return None
        failures = self.task.failure_count + 1
        limit = rules.failure_limit_of(self.task.max_retries, cfg.failure_limit)
        if rules.gives_up(failures, limit):
            return None  # this failure blocks the task gave_up: no next attempt to promise
        return rules.cooldown(failures, cfg.failure_backoff_base, cfg.failure_backoff_max)

    @staticmethod
    def _waiting(reason: str, wait: float | None) -> str:
        return reason if not wait else f"{reason} (next attempt in {wait:.0f} s)"

    def _file_failure(
        self, where: str, wider: str | None, classification: str, reason: str
    ) -> None:
        """File a failure with the storm breaker; a trip is logged, commented and counted,
        and claims stop for what it marks broken (``service/breaker.py``)."""
        failure = breaker.Failure(
            where,
            breaker.fingerprint(classification, reason),
            f"{self.task.board}/{self.task.id}",
            redact.shown(reason, 500),
            time.time(),
            wider,
        )
        trip = self.s.breaker.failed(failure)
        if trip is None:
            return
        log.error("storm breaker tripped: %s", trip.describe())
        metrics.BREAKER_TRIPS.labels(trip.scope).inc()
        self._note(f"storm breaker: {trip.describe()}")

    def _no_room(self) -> str | None:
        """Why the task's repository has too little free space for a run, or None. The
        daemon's disk guard measures only the repositories it has claimed in, so the first
        task of one is measured here: handed back uncounted, it teaches the daemon to
        hold claims until there is room (``service/disk.py``)."""
        if not self.task.workspace or isinstance(self.board, HostedBoard):
            return None
        spaces = disk.measure([self.task.workspace])
        return disk.shortage(spaces, self.s.cfg.min_free_disk_mb)

    def _workspace_scopes(self) -> tuple[str, str | None]:
        """Where a failure of the task's workspace or hooks is filed, and the scope it also
        counts towards: its workspace on its board, and the board (whose hooks they are);
        a task without a workspace, its board alone."""
        board = breaker.scope(breaker.BOARD, self.task.board)
        if self.task.workspace is None:
            return board, None
        return breaker.workspace_scope(self.task.board, self.task.workspace), board

    def _broken(self, provider: str) -> str | None:
        """Why ``provider`` may not be used now (the storm breaker marks it broken and no
        probe is due), or None; a due probe is started here."""
        where = breaker.scope(breaker.PROVIDER, provider)
        if self.s.breaker.admits(where, time.time()):
            return None
        trip = self.s.breaker.trips().get(where)
        return trip.describe() if trip is not None else None

    def _routing_failed(self, error: RoutingError) -> RunReport:
        """Carry out ``decide.after_routing_error``: cool down, block, or leave the run."""
        decision = decide.after_routing_error(error)
        log.warning(
            "%s/%s run %s: %s -> %s",
            self.task.board,
            self.task.id,
            self.run.id,
            redact.shown(decision.reason),
            decision.step.value,
        )
        if decision.step is decide.Step.COOLDOWN:
            return self._cooldown(decision.reason, f"router {error.cause.value}")
        if decision.step is decide.Step.BLOCK:
            assert decision.kind is not None
            return self._block(decision.reason, decision.kind)
        return self._report(RunEnd.ABANDON, redact.shown(decision.reason))  # cut short

    # -- steps ------------------------------------------------------------------
    def _workspace(self) -> workspace.Workspace:
        """The hosting board's workspace for the task (Hermes's kinds), else our git worktree."""
        if isinstance(self.board, HostedBoard):
            return self._hosted_workspace(self.board)
        return self._own_worktree(self.task.workspace)

    def _own_worktree(self, repository: str | None) -> workspace.Workspace:
        return workspace.prepare(
            repository,
            self.s.home.worktree(self.task.board, self.task.id),
            workspace.branch_name(self.task.board, self.task.id),
            owner=self.s.cfg.worker_user,
            run=self.run.id,
            is_current=self._run_is_current,
        )

    def _hosted_workspace(self, board: HostedBoard) -> workspace.Workspace:
        """The host's workspace; a repository's is this runner's own worktree of it, worked
        in at the same place (docs/ARCHITECTURE.md §5), and the host is told where."""
        board.link_worker_log(self.task.id, self.s.home.log_file(self.task.board, self.task.id))
        owner = self.s.cfg.worker_user
        hosted = board.prepare_workspace(
            self.task.id, lambda repository: workspace.creating(repository, owner)
        )
        top = workspace.repository_of(hosted.path, owner) if hosted.shared else None
        if top is None:
            return workspace.Workspace(hosted.path)
        own = self._own_worktree(str(top))
        inside = own.path / hosted.path.resolve().relative_to(top.resolve())
        if not inside.is_dir():  # a directory git does not track is not in the worktree
            inside = own.path
        self._guarded(board.record_workspace, self.task.id, inside)
        return workspace.Workspace(inside, own.taken_over_from)

    def _context(self) -> str:
        return plan.task_context(self.board, self.task)

    def _route(self, task_context: str) -> Route:
        lane = self.task.assignee or AUTO_ASSIGNEE
        avoid = plan.exclusion(self.s.home, lane, clock.now())
        route = plan.ask_route(self.s.router, task_context, lane, avoid)
        self._record_route(route)
        return route

    def _fallback(self, task_context: str, failed: Route, reason: str) -> Route:
        self.fell_back = True
        metrics.FALLBACKS.labels(failed.provider).inc()
        route = self.s.router.fallback(task_context, failed, reason)
        self._record_route(route)
        return route

    def _admit(self, task_context: str, route: Route) -> Route | None:
        """Hold a slot of the route's provider (``service/slots.py``) before any attempt.

        A provider at its cap means waiting for its slot, renewing the lease meanwhile,
        or, with ``provider_full = "fallback"``, one fallback to the other provider
        (whose slot is then waited for). None: the lease was lost or the runner is
        stopping while waiting; the run is not ours to go on with.
        """
        slots = self.s.slots
        beat = time.monotonic()
        while not slots.acquire(route.provider):
            if self.s.cfg.provider_full == "fallback" and not self.fell_back:
                route = self._fallback(
                    task_context, route, f"{route.provider} is at max_running_{route.provider}"
                )
                continue
            if self.s.activity.waiting(self.run.id) != route.provider:
                self.s.activity.update(self.run.id, waiting_for=route.provider)
                self._note(f"waiting for a {route.provider} slot (max_running_{route.provider})")
            slots.wait(min(self.s.cfg.heartbeat_interval, 1.0))
            if self.cancel.is_set():
                return None
            if time.monotonic() - beat >= self.s.cfg.heartbeat_interval:
                beat = time.monotonic()
                if not self._heartbeat():
                    return None
        self.held = route.provider
        self.s.activity.update(self.run.id, waiting_for=None)
        return route

    def _abandon_wait(self) -> RunReport:
        """Waiting for a slot ended without one: an operator's stop, or the run is not ours."""
        if self.stop is not None:
            return self._stopped(self.stop)
        return self._report(RunEnd.ABANDON, "lease lost or shutting down while waiting for a slot")

    def _stopped(self, stop: StopRequest) -> RunReport:
        """Carry out ``task stop``: the tree is already gone; end the run with the operator's
        reason, back to ready or blocked, never as a counted failure."""
        reason = f"stopped by an operator: {stop.reason}"
        metrics.STOPS.labels(self.task.board).inc()

        def end() -> bool:
            if stop.requeue:
                return self.board.reclaim(
                    self.run.id, reason, Outcome.RECLAIMED, count_failure=False
                )
            return self.board.block(self.run.id, reason, BlockKind.NEEDS_INPUT, count_failure=False)

        return self._end(RunEnd.STOPPED, reason, "reclaim" if stop.requeue else "block", end)

    def _release(self) -> None:
        if self.held is not None:
            self.s.slots.release(self.held)
            self.held = None

    def _record_route(self, route: Route) -> None:
        self.state.route = route.to_dict()  # saved with the attempt that follows
        self._note(route.describe())

    def _note(self, text: str) -> None:
        """A comment by the runner, skipped while the board is away."""
        self._guarded(self._say, text)

    def _say(self, text: str) -> None:
        """A comment by the runner; it may quote a worker's words, so bounded and redacted."""
        self.board.comment(self.task.id, redact.shown(text, display.MAX_LOG_CHARS), author=AUTHOR)

    def _log_tail(self, size: int = 8192) -> str:
        """The end of the task's provider log: what a restarted task's last provider said."""
        path = self.s.home.log_file(self.task.board, self.task.id)
        try:
            return files.read_tail(path, size).decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def _handoff_for(self, provider: str, worktree: Path, tail: str) -> str:
        """A different provider than the last one gets a handoff; the same one resumes."""
        previous = self.state.provider
        if previous is None or previous == provider:
            return ""
        return self._handoff(worktree, tail)

    def _handoff(self, worktree: Path, tail: str) -> str:
        owner = self.s.cfg.worker_user
        commits = self._commit_log()
        return workspace.handoff(worktree, tail, self.branch, owner=owner, commits=commits)

    def _commit_log(self) -> str:
        """The branch's commits since the task began, for the next turn or provider."""
        if not self.on_branch:
            return ""
        return delivery.commit_log(self.worktree, self.state.base, self.s.cfg.worker_user)

    def _attempt(self, route: Route, prompt: str, worktree: Path, turn: int) -> Attempt:
        """One provider turn, recorded in the lane state, provider health and metrics."""
        provider = route.provider
        planned = plan.plan_attempt(
            route, self.s.cfg, self.s.home, self.s.binaries, self.state.sessions, self.state.started
        )
        if planned.session_id is not None:  # resumed or reserved: known before the start
            logs.bind_session(planned.session_id)
        n = self.state.next_sequence()
        # A fresh session after an unknown-session resume writes its own result file.
        retry = self.state.next_sequence() if planned.cli.writes_result_file else None
        if planned.reserved and planned.session_id is not None:
            self.state.sessions[provider] = planned.session_id  # saved before the first start
        self.state.provider = provider
        record: dict[str, Any] = {
            "n": n,
            "run_id": self.run.id,
            "provider": provider,
            "model": route.model,
            "effort": route.effort,
            "turn": turn,
            "started_at": time.time(),
            "ended_at": None,
            "classification": None,
            "reason": None,
        }
        self.state.attempts.append(record)
        self._save_state()
        if planned.unusable is not None or planned.executable is None:
            unusable = planned.unusable or f"the {provider} CLI is not installed"
            attempt = Attempt(Classification.UNUSABLE, unusable, None, None, None, None, "")
        else:
            request = self._request(planned, planned.executable, prompt, worktree, n, retry)
            try:
                attempt = _storable(run_attempt(request))
            finally:
                self._settle_result_files(n, retry)
            self.state.started[provider] = True
            if attempt.session_id:
                self.state.sessions[provider] = attempt.session_id
        record.update(
            ended_at=time.time(),
            classification=attempt.classification.value,
            reason=attempt.reason[:2000],
        )
        ended = [self._state_document()]
        if attempt.structured is not None:
            candidate = journal_names.candidate(self.task.id, self.run.id, n)
            ended.append(Document(candidate, attempt.structured, new=True))
        self.s.journal.write_documents(self.task.board, ended)
        metrics.attempt_ended(provider, attempt.classification)
        self._record_health(provider, attempt)
        return attempt

    def _request(
        self,
        planned: plan.AttemptPlan,
        executable: Path,
        prompt: str,
        worktree: Path,
        n: int,
        retry: int | None,
    ) -> ProviderRequest:
        provider, route = planned.provider, planned.route
        self.s.activity.update(
            self.run.id, provider=provider, model=route.model, effort=route.effort
        )
        request = plan.request(
            planned,
            self.s.cfg,
            executable=executable,
            prompt=prompt,
            workspace=worktree,
            schema_path=self.s.schema_path,
            result_file=self._fresh_result_file(n),
            retry_result_file=None if retry is None else self._fresh_result_file(retry),
            log_path=self.s.home.log_file(self.task.board, self.task.id),
            env=worker_environment(
                provider,
                command.home_of(self.s.cfg.worker_user),
                {
                    **planned.settings,
                    **leftovers.markers(self.s.node, self.s.home.root),
                    **git.GIT_ENV,
                },
                passes=self.s.cfg.worker_env,
            ),
            deadline=self.deadline,
            worktree=self.worktree,
        )
        return dataclasses.replace(
            request,
            heartbeat=self._heartbeat,
            on_session=lambda value: self._on_session(provider, value),
            on_usage=lambda report: self._on_usage(provider, n, report),
            max_budget_usd=budget.dollars_left(self.budget, *self._spend()),
            cancel=self.cancel,
            on_progress=lambda progress: self.s.activity.progress(self.run.id, progress),
        )

    def _provider_result_file(self, n: int) -> Path:
        """Where the CLI writes its answer in attempt ``n`` (``plan.result_file``)."""
        return plan.result_file(self.s.cfg, self.s.home, self.task, self.run.id, n)

    def _fresh_result_file(self, n: int) -> Path:
        """Attempt ``n``'s result file name, cleared of anything planted there: the CLI
        must not write through a link or block on a FIFO, and no stale answer is read."""
        path = self._provider_result_file(n)
        try:
            files.clear(path)
        except OSError as error:  # the attempt still runs: the stream's answer stands
            log.warning("cannot clear %s before the attempt: %s", path, error)
        return path

    def _settle_result_files(self, *attempts: int | None) -> None:
        """A worker's result files go (the answer is the candidate now); the CLI's own, in
        the journal's directory, are made private (the CLI wrote them with its umask)."""
        for n in attempts:
            if n is None:
                continue
            path = self._provider_result_file(n)
            if self.s.cfg.worker_user:
                path.unlink(missing_ok=True)
                continue
            try:
                os.chmod(path, files.PRIVATE_FILE, follow_symlinks=False)
            except FileNotFoundError:
                continue  # the CLI wrote none (it failed before its answer)
            except OSError as error:  # a mode is no reason to fail the attempt
                log.warning("cannot make %s private: %s", path, error)

    def _spend(self) -> tuple[ledger.Totals, ledger.Totals]:
        """The task's spend over all its runs, and its board's over today (UTC), on every
        runner of the board: the board's copy as last read, and the home's own records
        (those not sent yet too). Reads no board: the CLI's pipe calls it."""
        records = self._usage_records()
        today = ledger.day_of(clock.now())
        return (
            ledger.total(r for r in records if r["task_id"] == self.task.id),
            ledger.total(r for r in records if r["day"] == today),
        )

    def _usage_records(self) -> list[dict[str, Any]]:
        return ledger.merged(self.on_board, self.s.ledger.records(self.task.board))

    def _share_usage(self, *, whole_task: bool = False) -> None:
        """Send the home's unsent usage records to the board, and read back the board's
        records that the budgets count (the task's, today's), which other runners' spend
        is in; ``whole_task``: the task's in any case (the completed event's summary).
        Without a budget a heartbeat reads nothing back: on a fleet's board, a day's
        records read at every heartbeat of every run would be the board's heaviest read.
        Best effort: a board that is away keeps the last copy read, the records stay
        unsent in the home (fsynced) and go at the next share, the sweep or recovery."""
        limits = self.budget
        task = whole_task or limits.max_cost_usd is not None or limits.max_tokens is not None
        try:
            with self.s.resting.use(self.task.board):
                usage_share.send(self.board, self.s.ledger)
                today = ledger.day_of(clock.now())
                self.on_board = ledger.merged(
                    usage_share.on_board(self.board, task_id=self.task.id) if task else [],
                    usage_share.on_board(self.board, since_day=today)
                    if limits.daily_usd is not None else [],
                )
        except BoardUnavailable as error:
            log.info("usage of %s/%s not shared with the board now (sent later): %s",
                     self.task.board, self.task.id, error)
        except OSError as error:  # the marks file: the records are sent again next time
            log.warning("usage marks of board %s not written: %s", self.task.board, error)

    def _budget_crossed(self) -> str | None:
        return budget.crossed(self.budget, *self._spend())

    def _on_usage(self, provider: str, n: int, report: UsageReport) -> None:
        """Put what the CLI just said it spent in the ledger, durably, before anything else
        happens to the attempt; a spend past the budget ends the attempt's tree."""
        attempt = ledger.Attempt(self.task.board, self.task.id, self.run.id, n, provider)
        try:
            added = self.s.ledger.record(attempt, report, self.s.cfg.prices, clock.now())
        except OSError as error:
            # The attempt goes on: stopping it would waste what was spent. Only this
            # figure is missing from the ledger, and the log says so.
            log.error("usage of %s/%s run %s attempt %s not recorded: %s", self.task.board,
                      self.task.id, self.run.id, n, error)
            return
        metrics.spent(added)
        if report.unknown:
            log.warning("run %s: %s", self.run.id, usage_note.impossible(provider, report.unknown))
            self.unknown_usage.add(provider, report.unknown)
        why = self._budget_crossed() if added else None
        if why is not None and self.over_budget is None:
            log.info("run %s: %s; ending the attempt", self.run.id, why)
            self.over_budget = why
            self.cancel.set()

    def _limit_wait(self) -> tuple[float, str] | None:
        """When every provider is under a usage limit whose reset its CLI named: the
        earliest reset, and why (``router/health.py``)."""
        healths = health.read_all(self.s.home.provider_health)
        return health.limit_wait(PROVIDERS, healths, clock.now())

    def _park(self, until: float, why: str) -> RunReport:
        """Back to ready, claimable at the reset: not a failure, and not a cooldown either
        (it does not count towards ``cooldown_limit``); a goal turn that could not run is
        not spent."""
        if self.turn_begun:
            self.state.goal_turn -= 1
            self.turn_begun = False
        self._save_state_if_possible()
        seconds = max(0.0, until - clock.now())
        self._note(f"{why}; the task waits until then")
        return self._requeue(why, why, seconds)

    def _budget_spent(self, why: str) -> RunReport:
        """The budget is spent: blocked ``budget`` with the spend, for a person to raise it."""
        return self._block(why, BlockKind.BUDGET)

    def _on_session(self, provider: str, session_id: str) -> None:
        """Persist a new session id the moment it appears, so a crash right after can resume it."""
        logs.bind_session(session_id)
        self.state.sessions[provider] = session_id
        self.state.started[provider] = True
        self._save_state()

    def _heartbeat(self) -> bool:
        """Renew the lease, say the run is alive, look for an operator's stop, and share the
        usage ledger with the board (other runners' spend counts towards the budgets)."""
        renewed = self._renew()
        if renewed:
            self._progress_note()
            self._look_for_stop()
            self._share_usage()
        return renewed

    def _renew(self) -> bool:
        """Renew the lease; storage trouble keeps the worker until the lease is really gone."""
        sent = time.monotonic()  # the board stamps the lease after this: never overestimated
        try:
            renewed = self.board.heartbeat(self.run.id, self.s.cfg.lease_ttl)
        except BoardUnavailable as error:
            log.warning(
                "heartbeat for run %s not stored (%s); %.1f s of its lease known left",
                self.run.id,
                error,
                self.lease_until - sent,
            )
            return sent < self.lease_until
        if renewed:
            self.lease_until = sent + self.s.cfg.lease_ttl
            self.s.activity.heartbeat(self.run.id)
        return renewed

    def _progress_note(self) -> None:
        """Every ``progress_note_interval`` of a long attempt, a comment says it is alive,
        so a person reading the board sees work going on, not silence."""
        interval = self.s.cfg.progress_note_interval
        now = time.monotonic()
        if not interval or now - self.noted_at < interval:
            return
        self.noted_at = now
        route = self.state.route or {}
        self._note(
            f"still working: {route.get('provider')}/{route.get('model')} at "
            f"{route.get('effort')} effort"
            f"{goal_words(self.state.goal_turn, self.task.goal_turns)}, "
            f"{now - self.started:.0f} s into the run"
        )

    def _look_for_stop(self) -> None:
        """An operator's ``task stop`` is stored on the board; each heartbeat looks for it,
        so it works from any shell and any node. Seen: the process tree is ended."""
        if self.stop is not None:
            return
        try:
            self.stop = self.board.stop_request(self.run.id)
        except BoardUnavailable as error:
            log.debug("stop request of run %s not readable now: %s", self.run.id, error)
            return
        if self.stop is not None:
            log.info("run %s: stop requested: %s", self.run.id, self.stop.reason)
            self.cancel.set()

    def _judge(self, task_context: str, attempt: Attempt, turn: int) -> tuple[bool, str]:
        """Every completed answer passes the structural check (no blockers, a summary that
        claims no unfinished work); in goal mode the configured judge has the last word."""
        result = attempt.structured
        if result is None or result["status"] != "completed":
            return False, ""
        verdict, judge = structural_verdict(result), "structural"
        if verdict.accepted and self.task.goal_turns > 1:
            judge = self.s.cfg.judge or "structural"
            try:
                verdict = self.s.judge.judge(self._judge_context(task_context, turn), result)
            except RoutingError as error:
                log.warning("judge unavailable (%s); falling back to the structural judge", error)
                judge = "structural"
        self.verdict = {"judge": judge, "accepted": verdict.accepted, "reason": verdict.reason}
        return verdict.accepted, verdict.reason

    def _judge_context(self, task_context: str, turn: int) -> str:
        """What the judge reads: the task, and where the goal stands (turn and rejections)."""
        rejections = self.state.goal_rejections
        if turn <= 1 and not rejections:
            return task_context
        earlier = "\n".join(f"- {reason}" for reason in rejections) or "- (none recorded)"
        return (
            f"{task_context}\n\n## Goal so far\nThis is turn {turn} of at most "
            f"{self.task.goal_turns}. Earlier turns were not accepted because:\n{earlier}"
        )

    def _record_health(self, provider: str, attempt: Attempt) -> None:
        directory = self.s.home.provider_health
        limit, now = attempt.limit, clock.now()
        if (
            attempt.classification is Classification.CAPACITY
            and limit is not None
            and limit.resets_at is not None
            and limit.resets_at > now
        ):
            health.record_limit(directory, provider, limit.words, limit.resets_at, now)
            self._note(f"{provider}: {limit.words}")
        elif attempt.classification is Classification.CAPACITY:
            health.record_failure(directory, provider, "capacity", attempt.reason)
        elif attempt.classification is Classification.AUTH:
            health.record_failure(directory, provider, "auth", attempt.reason)
        elif attempt.classification is Classification.MISCONFIGURED:
            health.record_failure(directory, provider, "misconfigured", attempt.reason)
        elif attempt.classification is Classification.OK:
            health.record_success(directory, provider)
            self.s.breaker.succeeded(breaker.scope(breaker.PROVIDER, provider))

    def _accept(self, result: dict[str, Any], route: Route) -> RunReport:
        """The accepted result is kept in the lane state before its commit is made, so a run
        after a crash finds that commit again instead of making a second one."""
        self.state.accept(result, self._completion_metadata(result, route))
        self._save_state()
        return self._deliver()

    def _deliver(self) -> RunReport:
        """Commit the accepted result on the task's branch, then hand it to the journal and
        the board (docs/ARCHITECTURE.md §6: the commit comes before the pending record)."""
        accepted = self.state.delivery
        assert accepted is not None
        result, metadata = accepted["result"], dict(accepted["metadata"])
        provider = metadata["route"]["provider"]
        if self.on_branch:
            try:
                branchhead.bring_back(self.worktree, self.branch, self.s.cfg.worker_user)
                delivered = delivery.deliver(
                    self.worktree,
                    self.branch,
                    self.state.base,
                    self._facts(accepted),
                    delivery.Author.of(self.s.cfg.commit_author),
                    self.s.cfg.worker_user,
                )
            except branchhead.HeadElsewhere as error:
                return self._block(
                    f"{error}: put the work on {self.branch} in {self.worktree} and unblock "
                    "the task; the accepted result is delivered then",
                    BlockKind.NEEDS_INPUT,
                )
            except delivery.DeliveryError as error:
                return self._block(
                    f"the accepted result could not be committed: {error}; fix the worktree "
                    "and unblock the task, the result is delivered then",
                    BlockKind.CAPABILITY,
                )
            metadata["delivery"] = delivered.to_dict()
        self.s.journal.write_pending(
            self.task.board, self.task.id, self.run.id, result, result["summary"], metadata
        )
        self.state.journaled(metadata)
        self._save_state_if_possible()
        outcome = self._until_landed("result", self._finalize)
        if outcome is None:
            self._note_waiting_result()
            return self._report(
                RunEnd.PENDING, "the board is unavailable; recovery will commit", provider
            )
        if outcome is FinalizeOutcome.COMMITTED:
            self._follow_up(result["summary"], metadata.get("delivery"))
        return self._report(RunEnd(outcome.value), result["summary"], provider)

    def _follow_up(self, summary: str, delivered: dict[str, Any] | None) -> None:
        """The push and the after_done hook (``run/followup.py``); the task is done already."""
        steps = followup.Steps(self.state, self._save_state)
        facts = followup.facts_of(
            self.task.board, self.task.id, self.task.title, self.worktree, self.run.id,
            summary, delivered, steps.key,
        )
        notes = followup.Notes(
            self._say, lambda: [c.body for c in self.board.comments(self.task.id)]
        )
        followup.follow_up(self.s.cfg, facts, delivered, notes, self.s.cancel, steps)

    def _before_work(self, prepared: workspace.Workspace) -> hooks.Ran | None:
        """``after_create`` for a worktree this run made, then ``before_run``: the first
        that fails, or None."""
        for name in ("after_create", "before_run"):
            if name == "after_create" and not prepared.created:
                continue
            ran = self._hook(name)
            if ran is not None and ran.fatal:
                return ran
        return None

    def _hook(self, name: str, summary: str = "") -> hooks.Ran | None:
        """Run the board's hook ``name`` in the worktree; a failure that does not fail the
        attempt is commented (``run/hooks.py``)."""
        cfg = self.s.cfg
        if not hooks.configured(cfg.hooks, self.task.board).get(name):
            return None
        facts = hooks.Facts(
            board=self.task.board,
            task_id=self.task.id,
            title=self.task.title,
            branch=self.branch if self.on_branch else "",
            worktree=self.worktree,
            run_id=self.run.id,
            commit=delivery.head(self.worktree, self.s.cfg.worker_user) if self.on_branch else None,
            summary=summary,
        )
        ran = hooks.run(cfg.hooks, name, facts, owner=cfg.worker_user, passes=cfg.worker_env,
                        egress=hooks.egress(cfg))
        if ran is not None and not ran.ok and not ran.fatal:
            self._note(ran.describe())
        return ran

    def _hook_failed(self, ran: hooks.Ran, prepared: workspace.Workspace) -> RunReport:
        """A failing after_create or before_run fails the attempt, counted. A worktree this
        run made goes again, so the next attempt makes it afresh and runs after_create."""
        if prepared.created:
            left = workspace.remove(self.worktree, self.s.cfg.worker_user, force=True)
            if left is not None:
                log.warning("worktree %s not removed after %s: %s", self.worktree, ran.hook, left)
        told = redact.text(ran.describe())
        self.state.progressed()
        self.state.failed(told)
        self._save_state_if_possible()
        wait = self._backoff()
        self._file_failure(*self._workspace_scopes(), f"hook {ran.hook}", told)
        reason = self._waiting(told, wait)
        return self._end(
            RunEnd.RETRY,
            reason,
            "reclaim",
            lambda: self.board.reclaim(
                self.run.id, reason, Outcome.FAILED, count_failure=True, cooldown=wait
            ),
        )

    def _facts(self, accepted: dict[str, Any]) -> delivery.Facts:
        route = accepted["metadata"]["route"]
        return delivery.Facts(
            board=self.task.board,
            task_id=self.task.id,
            run_id=accepted["accepted_run"],
            title=self.task.title,
            summary=accepted["result"]["summary"],
            provider=route["provider"],
            model=route["model"],
            carried=delivery.Carried(accepted["result"], accepted["metadata"], self.state.base),
        )

    def _earlier_result_waits(self) -> bool:
        """An earlier run's result was accepted (and maybe committed) but never reached the
        journal: the runner stopped in between. One the board completed is not waiting."""
        if not self.state.redeliverable():
            return False
        assert self.state.delivery is not None
        try:
            earlier = self.board.get_run(self.state.delivery["run"])
        except NotFound:
            earlier = None
        if earlier is not None and earlier.outcome is Outcome.COMPLETED:
            self.state.delivery = None
            return False
        return True

    def _undelivered_on_branch(self) -> bool:
        """An earlier run's accepted result that its commit on the task's branch carries
        and the board never got (its runner died, maybe in another home): this run takes
        it up to deliver it (``run/undelivered.py``)."""
        if not self.on_branch:
            return False
        found = undelivered.on_branch(
            self.board, self.worktree, self.task.board, self.task.id, self.run.id,
            self.s.cfg.worker_user,
        )
        if found is None:
            return False
        self.state.delivery = found.delivery()
        self.state.base = found.carried.base  # the event's diff starts where that run's did
        return True

    def _redeliver(self) -> RunReport:
        """Deliver the earlier run's accepted result as this run's, without a provider: its
        commit is found by its trailers, never made twice."""
        assert self.state.delivery is not None
        earlier = self.state.delivery["accepted_run"]
        self._note(
            f"run {earlier}'s accepted result had not reached the journal when its runner "
            "stopped; this run delivers it (its commit is not made twice, its CLI not run again)"
        )
        self.state.delivery = {**self.state.delivery, "run": self.run.id}
        self._save_state()
        return self._deliver()

    def _finalize(self) -> FinalizeOutcome:
        """One try to commit the accepted result; BoardUnavailable while the board would not."""
        with metrics.COMMIT_SECONDS.time():
            outcome = self.s.journal.finalize(
                self.task.board, self.task.id, self.run.id, self.s.commit
            )
        if outcome is FinalizeOutcome.PENDING:
            raise BoardUnavailable(f"board {self.task.board!r} did not take the result yet")
        return outcome

    def _completion_metadata(self, result: dict[str, Any], route: Route) -> dict[str, Any]:
        """How the result was reached, for whoever reads the board: stored with the
        completed event (and in the journal record, so a replay carries it too)."""
        return {
            "node": self.s.node,
            "route": {
                "provider": route.provider,
                "model": route.model,
                "effort": route.effort,
                "classifier": route.classifier,
                "reason": route.reason,
            },
            "sessions": dict(self.state.sessions),
            "goal_turn": self.state.goal_turn,
            "goal_turns": self.task.goal_turns,
            "judge": self.verdict,
            "changed_files": list(result["changed_files"]),
            "tests_run": list(result["tests_run"]),
            "usage": self._usage_summary(),
        }

    def _usage_summary(self) -> dict[str, Any]:
        """What the task (on every runner) and this run spent, for the completed event."""
        self._share_usage(whole_task=True)
        records = self._usage_records()
        return {
            "task": ledger.task_usage(records, self.task.id),
            "run": ledger.total(r for r in records if r["run_id"] == self.run.id).to_dict(),
        }

    def _note_waiting_result(self) -> None:
        self._note(
            f"the accepted result of run {self.run.id} waits in the journal for this board; "
            "the daemon's recovery commits it as soon as the board takes it"
        )

    def _block(self, reason: str, kind: BlockKind) -> RunReport:
        reason = redact.shown(reason)  # shown to anyone who reads the board: bounded, no secrets
        # A person takes over: after an unblock the goal and the cycle count start anew.
        self.state.progressed()
        self.state.restart_goal()
        self._save_state_if_possible()
        metrics.BLOCKS.labels(kind.value).inc()
        return self._end(
            RunEnd.BLOCK,
            reason,
            "block",
            lambda: self.board.block(self.run.id, reason, kind, count_failure=False),
        )

    def _run_is_current(self, run_id: int) -> bool:
        """Whether another run of this board still holds its claim (its worktree is not ours)."""
        try:
            return self.board.get_run(run_id).ended_at is None
        except NotFound:
            return False  # a run of no board we know: its worktree is stale

    def _wait_for_workspace(self, reason: str) -> RunReport:
        """Another current run holds the task's branch: try later, not a counted failure."""
        seconds = rules.cooldown(1, self.s.cfg.cooldown_base, self.s.cfg.cooldown_max)
        return self._requeue(reason, f"workspace busy: {reason}", seconds)

    def _cooldown(self, reason: str, cause: str) -> RunReport:
        """Back to ready after a wait, uncounted, but only ``cooldown_limit`` times in a
        row (``cycling``). A goal turn that could not run is not spent."""
        reason = redact.shown(reason)  # a routing error may quote the router's URL
        self.state.cooled_down(cause, reason, time.time())
        if cause == Classification.STALLED.value:
            self.state.failed(reason)  # the next run is told: a command it ran may hang
        verdict = cycling.after_cooldown(
            self.state.cooldowns, self.state.cycles, self.s.cfg.cooldown_limit
        )
        if verdict.block:
            assert verdict.kind is not None
            return self._block(verdict.reason, verdict.kind)
        if self.turn_begun:
            self.state.goal_turn -= 1
        self._save_state_if_possible()
        # The wait doubles with each cooldown in a row, whatever its cause.
        seconds = rules.cooldown(
            self.state.cooldowns, self.s.cfg.cooldown_base, self.s.cfg.cooldown_max
        )
        return self._requeue(
            f"{reason} (next attempt in {seconds:.0f} s)",
            f"{cause}: {reason}",  # the run says why it waits: capacity, router unreachable
            seconds,
        )

    def _requeue(self, reason: str, board_reason: str, seconds: float) -> RunReport:
        """Back to ready, uncounted, claimable again after ``seconds``."""
        return self._end(
            RunEnd.COOLDOWN,
            reason,
            "reclaim",
            lambda: self.board.reclaim(
                self.run.id,
                board_reason,
                Outcome.RECLAIMED,
                count_failure=False,
                cooldown=seconds,
            ),
        )

    # -- helpers ----------------------------------------------------------------
    def _save_state(self) -> None:
        self.s.journal.write_documents(self.task.board, [self._state_document()])

    def _save_state_if_possible(self) -> None:
        """Save the state on the way out of a run. A failing disk loses only this update
        (one cooldown or rejection uncounted), which is safe: the board write follows."""
        try:
            self._save_state()
        except OSError as error:
            log.warning("lane state of %s/%s not saved: %s", self.task.board, self.task.id, error)

    def _state_document(self) -> Document:
        return Document(journal_names.lane_state(self.task.id), self.state.to_document())

    def _guarded(self, operation: Any, *args: Any, **kwargs: Any) -> Any:
        """A board write the run can do without (a comment): skipped when the board is away."""
        try:
            return operation(*args, **kwargs)
        except BoardUnavailable as error:
            log.warning(
                "board %s unavailable for %s: %s; skipped",
                self.task.board,
                getattr(operation, "__name__", operation),
                error,
            )
            return None

    def _end(
        self,
        ended: RunEnd,
        reason: str,
        what: str,
        step: Callable[[], object],
        provider: str | None = None,
    ) -> RunReport:
        """End the run on the board with ``step`` (a block or a reclaim), as ``ended`` once
        it landed; ABANDON when it could not (``_until_landed`` says why)."""

        def on_board() -> object:
            with self.s.resting.use(self.task.board):
                return step()

        self._share_usage()  # before the task is free to run elsewhere, on this spend
        if self._until_landed(what, on_board) is None:
            return self._report(RunEnd.ABANDON, f"{what} not stored: {reason}", provider)
        return self._report(ended, reason, provider)

    def _until_landed(self, what: str, step: Callable[[], T]) -> T | None:
        """The run's ending (a completion, block or reclaim), tried until the board takes it.

        Giving up at the first unavailable board would leave the run ``running`` with no
        slot behind it until its lease ran out (30 min by default). So the slot is kept
        and the step tried again whenever the board's rest allows (``service/resting.py``),
        the lease renewed meanwhile, until it lands. None when it did not: the lease is
        really lost (the lease's rescue settles the run) or the runner is stopping after
        its grace (the next start reclaims the run; a result stays in the journal).
        ``step`` raises BoardUnavailable while the board would not take it.
        """
        slug = self.task.board
        renewed = time.monotonic()
        waiting = False
        while True:
            try:
                return step()
            except BoardUnavailable as error:
                if not waiting:
                    waiting = True
                    log.warning(
                        "board %s unavailable for the %s of run %s (%s); tried again "
                        "while its lease holds",
                        slug,
                        what,
                        self.run.id,
                        error,
                    )
                    self.s.activity.update(self.run.id, ending=f"{what} waits for board {slug}")
            now = time.monotonic()
            if now - renewed >= self.s.cfg.heartbeat_interval:
                renewed = now
                lease_held = self._renew()
            else:
                lease_held = now < self.lease_until
            if not lease_held:
                log.warning("run %s lost its lease; its %s is left to a rescue", self.run.id, what)
                return None
            pause = max(self.s.resting.remaining(slug), RETRY_PAUSE)
            if self.s.cancel.wait(min(pause, self.s.cfg.heartbeat_interval)):
                log.info("stopping: the %s of run %s waits for the next start", what, self.run.id)
                return None

    def _report(self, ended: RunEnd, reason: str, provider: str | None = None) -> RunReport:
        return RunReport(self.task.board, self.task.id, self.run.id, ended, reason, provider)


def _storable(attempt: Attempt) -> Attempt:
    """The provider's words as every board can store them (see ``rules.storable``)."""
    attempt.structured = rules.storable(attempt.structured)
    attempt.reason = rules.storable(attempt.reason)
    return attempt


