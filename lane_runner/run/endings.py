"""How a run ends without a result on the board (docs/ARCHITECTURE.md §1): blocked for a
person, cooled down, requeued, parked until a usage limit resets, or back to ready
after a counted failure with its backoff; each landed on the board through the lease's
bounded tries (``Lease.until_landed``). The waits and words are ``run/waits.py``'s
(pure); this room carries them out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from lane_runner import clock, redact
from lane_runner.board import rules
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import BlockKind, Outcome, StopRequest
from lane_runner.providers import Classification
from lane_runner.router import RoutingError
from lane_runner.run import command, decide, hooks, waits, workspace
from lane_runner.run.claimed import Claimed, RunEnd, RunReport
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.spending import Spending
from lane_runner.service import breaker, metrics

log = logging.getLogger(__name__)


class Endings:
    def __init__(
        self, claimed: Claimed, notebook: Notebook, spending: Spending, lease: Lease
    ) -> None:
        self.c, self.notebook, self.spending, self.lease = claimed, notebook, spending, lease

    # -- blocked, or back to ready ---------------------------------------------------
    def block(self, reason: str, kind: BlockKind) -> RunReport:
        reason = redact.shown(reason)  # shown to anyone who reads the board: bounded, no secrets
        # A person takes over: after an unblock the goal, the cycle count and any answer's
        # verification start anew.
        self.c.state.progressed()
        self.c.state.restart_goal()
        self.c.state.verification = None
        self.notebook.save_if_possible()
        metrics.BLOCKS.labels(kind.value).inc()
        run_id, board = self.c.run.id, self.c.board
        return self.end(
            RunEnd.BLOCK,
            reason,
            "block",
            lambda: board.block(run_id, reason, kind, count_failure=False),
        )

    def cooldown(self, reason: str, cause: str) -> RunReport:
        """Back to ready after a wait, uncounted, but only ``cooldown_limit`` times in a
        row (``cycling``). A goal turn that could not run is not spent."""
        reason = redact.shown(reason)  # a routing error may quote the router's URL
        state, backoff = self.c.state, self.c.settings.backoff
        state.cooled_down(cause, reason, time.time())
        plan = waits.cooldown(
            cause, reason, state.cooldowns, state.cycles, backoff.cooldown_limit,
            backoff.cooldown_base, backoff.cooldown_max,
        )
        if plan.tells_next_run:
            state.failed(reason)
        if plan.block.block:
            assert plan.block.kind is not None
            return self.block(plan.block.reason, plan.block.kind)
        if self.c.turn_begun:
            state.goal_turn -= 1
        self.notebook.save_if_possible()
        return self.requeue(plan.reason, plan.board_reason, plan.seconds)

    def requeue(self, reason: str, board_reason: str, seconds: float) -> RunReport:
        """Back to ready, uncounted, claimable again after ``seconds``."""
        run_id, board = self.c.run.id, self.c.board
        return self.end(
            RunEnd.COOLDOWN,
            reason,
            "reclaim",
            lambda: board.reclaim(
                run_id, board_reason, Outcome.RECLAIMED, count_failure=False, cooldown=seconds
            ),
        )

    def requeue_soon(self, reason: str, board_reason: str) -> RunReport:
        """Back to ready after the first cooldown's wait: trouble that is not the task's."""
        backoff = self.c.settings.backoff
        seconds = rules.cooldown(1, backoff.cooldown_base, backoff.cooldown_max)
        return self.requeue(reason, board_reason, seconds)

    def park(self, until: float, why: str) -> RunReport:
        """Back to ready, claimable at the reset: not a failure, and not a cooldown either
        (it does not count towards ``cooldown_limit``); a goal turn that could not run is
        not spent."""
        if self.c.turn_begun:
            self.c.state.goal_turn -= 1
            self.c.turn_begun = False
        self.notebook.save_if_possible()
        seconds = waits.park(until, clock.now())
        self.notebook.note(f"{why}; the task waits until then")
        return self.requeue(why, why, seconds)

    def retry(self, decision: decide.Decision, classification: str, provider: str) -> RunReport:
        """Carry out ``decide``'s RETRY: back to ready, counted or not, after its backoff."""
        outcome = decision.outcome
        assert outcome is not None
        self.c.state.progressed()
        self.c.state.failed(decision.reason)
        self.notebook.save_if_possible()
        plan = waits.retry(decision, Classification(classification), self._backoff())
        reason = redact.shown(plan.reason)
        if plan.filed:
            self.file_failure(
                breaker.scope(breaker.PROVIDER, provider), None, classification, decision.reason
            )
        run_id, board, counted = self.c.run.id, self.c.board, decision.count_failure
        return self.end(
            RunEnd.RETRY,
            reason,
            "reclaim",
            lambda: board.reclaim(
                run_id, reason, outcome, count_failure=counted, cooldown=plan.wait
            ),
            provider,
        )

    def hook_failed(self, ran: hooks.Ran, prepared: workspace.Workspace) -> RunReport:
        """A failing after_create or before_run fails the attempt, counted. A worktree this
        run made goes again, so the next attempt makes it afresh and runs after_create."""
        c = self.c
        if prepared.created:
            left = workspace.remove(c.worktree, c.settings.worker.user, force=True)
            if left is not None:
                log.warning("worktree %s not removed after %s: %s", c.worktree, ran.hook, left)
        told = redact.text(ran.describe())
        c.state.progressed()
        c.state.failed(told)
        self.notebook.save_if_possible()
        wait = self._backoff()
        self.file_failure(*self.workspace_scopes(), f"hook {ran.hook}", told)
        reason = waits.waiting(told, wait)
        run_id, board = c.run.id, c.board
        return self.end(
            RunEnd.RETRY,
            reason,
            "reclaim",
            lambda: board.reclaim(
                run_id, reason, Outcome.FAILED, count_failure=True, cooldown=wait
            ),
        )

    def _backoff(self) -> float | None:
        """The wait after this counted failure (``waits.backoff``)."""
        backoff, task = self.c.settings.backoff, self.c.task
        return waits.backoff(
            task.failure_count, task.max_retries, backoff.failure_limit,
            backoff.failure_backoff_base, backoff.failure_backoff_max,
        )

    # -- why the run ends here -----------------------------------------------------------
    def budget_spent(self, why: str) -> RunReport:
        """The budget is spent: blocked ``budget`` with the spend, for a person to raise it."""
        return self.block(why, BlockKind.BUDGET)

    def stopped(self, stop: StopRequest) -> RunReport:
        """Carry out ``task stop``: the tree is already gone; end the run with the operator's
        reason, back to ready or blocked, never as a counted failure."""
        reason = f"stopped by an operator: {stop.reason}"
        metrics.STOPS.labels(self.c.task.board).inc()
        run_id, board = self.c.run.id, self.c.board

        def end() -> bool:
            if stop.requeue:
                return board.reclaim(run_id, reason, Outcome.RECLAIMED, count_failure=False)
            return board.block(run_id, reason, BlockKind.NEEDS_INPUT, count_failure=False)

        return self.end(RunEnd.STOPPED, reason, "reclaim" if stop.requeue else "block", end)

    def abandon_wait(self) -> RunReport:
        """Waiting for a slot ended without one: an operator's stop, or the run is not ours."""
        if self.lease.stop is not None:
            return self.stopped(self.lease.stop)
        return self.c.report(
            RunEnd.ABANDON, "lease lost or shutting down while waiting for a slot"
        )

    def routing_failed(self, error: RoutingError) -> RunReport:
        """Carry out ``decide.after_routing_error``: cool down, block, or leave the run."""
        c = self.c
        decision = decide.after_routing_error(error)
        log.warning(
            "%s/%s run %s: %s -> %s", c.task.board, c.task.id, c.run.id,
            redact.shown(decision.reason), decision.step.value,
        )
        if decision.step is decide.Step.COOLDOWN:
            return self.cooldown(decision.reason, f"router {error.cause.value}")
        if decision.step is decide.Step.BLOCK:
            assert decision.kind is not None
            return self.block(decision.reason, decision.kind)
        return c.report(RunEnd.ABANDON, redact.shown(decision.reason))  # cut short

    def cut_short(self, error: command.Cancelled) -> RunReport:
        """The shutdown ended a git command or hook of the run: left as a crash leaves it
        (the next start resumes it, or commits a result the journal holds), uncounted."""
        log.info("run %s cut short by the shutdown: %s", self.c.run.id, error)
        if self.c.holds_result():
            return self.c.report(RunEnd.PENDING, f"result kept in the journal: {error}")
        return self.c.report(RunEnd.ABANDON, f"cut short: {error}")

    def hand_back(self, error: BoardUnavailable) -> RunReport:
        """A board read the run needed failed: back to ready after a short wait, uncounted
        (a board outage is not the task's fault), the provider session kept for resume."""
        c = self.c
        log.warning(
            "board unavailable during %s/%s run %s: %s; handing the run back",
            c.task.board, c.task.id, c.run.id, error,
        )
        reason = redact.shown(f"board unavailable: {error}")
        return self.requeue_soon(reason, reason)

    def storage_failed(self, error: OSError) -> RunReport:
        """The home's disk is full or failing: not the task's fault, so not a counted failure.

        Whatever was accepted is either durable in the journal (recovery commits it;
        the run stays claimed) or was never written (the run is retried after a
        cooldown, its provider session kept).
        """
        c = self.c
        log.error(
            "state directory error in %s/%s run %s: %s", c.task.board, c.task.id, c.run.id, error
        )
        if c.holds_result():
            self.note_waiting_result()
            return c.report(RunEnd.PENDING, f"result kept in the journal despite: {error}")
        return self.cooldown(f"state directory error: {error}", "storage")

    def note_waiting_result(self) -> None:
        self.notebook.note(
            f"the accepted result of run {self.c.run.id} waits in the journal for this board; "
            "the daemon's recovery commits it as soon as the board takes it"
        )

    # -- the storm breaker -----------------------------------------------------------------
    def file_failure(
        self, where: str, wider: str | None, classification: str, reason: str
    ) -> None:
        """File a failure with the storm breaker; a trip is logged, commented and counted,
        and claims stop for what it marks broken (``service/breaker.py``)."""
        c = self.c
        failure = breaker.Failure(
            where,
            breaker.fingerprint(classification, reason),
            f"{c.task.board}/{c.task.id}",
            redact.shown(reason, 500),
            time.time(),
            wider,
        )
        trip = c.s.breaker.failed(failure)
        if trip is None:
            return
        log.error("storm breaker tripped: %s", trip.describe())
        metrics.BREAKER_TRIPS.labels(trip.scope).inc()
        self.notebook.note(f"storm breaker: {trip.describe()}")

    def workspace_scopes(self) -> tuple[str, str | None]:
        """Where a failure of the task's workspace or hooks is filed, and the scope it also
        counts towards: its workspace on its board, and the board (whose hooks they are);
        a task without a workspace, its board alone."""
        task = self.c.task
        board = breaker.scope(breaker.BOARD, task.board)
        if task.workspace is None:
            return board, None
        return breaker.workspace_scope(task.board, task.workspace), board

    # -- on the board ------------------------------------------------------------------------
    def end(
        self,
        ended: RunEnd,
        reason: str,
        what: str,
        step: Callable[[], object],
        provider: str | None = None,
    ) -> RunReport:
        """End the run on the board with ``step`` (a block or a reclaim), as ``ended`` once
        it landed; ABANDON when it could not (``Lease.until_landed`` says why)."""
        s, slug = self.c.s, self.c.task.board

        def on_board() -> object:
            with s.resting.use(slug):
                return step()

        self.spending.share()  # before the task is free to run elsewhere, on this spend
        if self.lease.until_landed(what, on_board) is None:
            return self.c.report(RunEnd.ABANDON, f"{what} not stored: {reason}", provider)
        return self.c.report(ended, reason, provider)
