"""The goal-turn loop of a run (docs/ARCHITECTURE.md §1): attempt after attempt until
``decide`` says how it ends. A turn not accepted is another goal turn (routed afresh,
told why, with the branch's commits); a provider without capacity or login is left for
the other one, with a handoff; everything else ends the run, as an accepted result
(``accepted``) or an ending (``endings``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from lane_runner import files, redact
from lane_runner.providers import Attempt, Classification
from lane_runner.router import Route, RoutingError
from lane_runner.run import context as contexts
from lane_runner.run import decide, delivery, handoff, workspace
from lane_runner.run.accepted import Accepted
from lane_runner.run.attempt import Attempts
from lane_runner.run.claimed import Claimed, RunEnd, RunReport
from lane_runner.run.endings import Endings
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.routing import Routing
from lane_runner.run.spending import Spending
from lane_runner.run.verifier import Feedback, Verified, Verifier
from lane_runner.run.workplace import Workplace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Turn:
    """What a goal turn starts with."""

    number: int  # counts from 1 over the task's runs: a restarted goal carries on counting
    route: Route
    handoff: str  # for a provider other than the last one: what the branch holds so far
    continuation: str  # why the previous answer or run was not enough


@dataclass(frozen=True)
class Rooms:
    """The rooms of one run the goal loop works with."""

    notebook: Notebook
    spending: Spending
    lease: Lease
    endings: Endings
    routing: Routing
    attempts: Attempts
    accepted: Accepted
    workplace: Workplace
    verifier: Verifier


class GoalLoop:
    def __init__(self, claimed: Claimed, rooms: Rooms) -> None:
        self.c, self.r = claimed, rooms

    def work(self, prepared: workspace.Workspace, task_context: str, route: Route) -> RunReport:
        """Goal turns until one ends the run."""
        c = self.c
        handoff = self._handoff_for(route.provider, self._log_tail())
        if handoff:
            self.r.notebook.note(
                f"provider changed at restart: {c.state.provider} -> {route.provider}; "
                f"a handoff of branch {c.branch} is attached"
            )
        if not handoff and prepared.taken_over_from is not None and c.state.provider is None:
            # The earlier attempt ran in another home: this one knows it only by its worktree.
            handoff = self._handoff("")
        continuation = contexts.after_failure(c.state.take_retry_reason())
        turn = Turn(c.state.goal_turn + 1, route, handoff, continuation)
        if self.r.verifier.pending is not None:
            carried = self._carry_on(task_context, turn)
            if isinstance(carried, RunReport):
                return carried
            turn = carried
        while True:
            ended = self._turn(task_context, turn)
            if isinstance(ended, RunReport):
                return ended
            turn = ended

    def _turn(self, task_context: str, turn: Turn) -> RunReport | Turn:
        """One goal turn: the next turn, or how the run ended."""
        c = self.c
        c.state.goal_turn = turn.number
        c.s.activity.update(c.run.id, turn=turn.number)
        c.turn_begun = True
        tried = self._try(task_context, turn)
        if isinstance(tried, RunReport):
            return tried
        attempt, decision = tried
        spent = self.r.spending.spent_in_attempt(decision.step is decide.Step.ACCEPT)
        if spent is not None:
            return self.r.endings.budget_spent(spent)
        wait = self.r.attempts.limit_wait() if decide.waits_for_capacity(decision.step) else None
        if wait is not None:
            return self.r.endings.park(*wait)
        log.info(
            "%s/%s run %s%s: %s -> %s (%s)", c.task.board, c.task.id, c.run.id,
            c.goal_words(turn.number), attempt.classification.value, decision.step.value,
            decision.reason,
        )
        if decision.step is decide.Step.CONTINUE:
            return self._next_turn(task_context, turn, attempt, decision.reason)
        if decision.step is decide.Step.FALLBACK:
            return self._fall_back(task_context, turn, attempt, decision.reason)
        if decision.step is decide.Step.ACCEPT and self.r.verifier.policy.active:
            assert attempt.structured is not None
            return self._verified(
                self.r.verifier.verify(attempt.structured, turn.route, task_context), turn
            )
        if decision.step is not decide.Step.ABANDON:
            summary = (attempt.structured or {}).get("summary", "")
            self.r.workplace.hook("after_run", summary=summary)
        return self._conclude(decision, attempt, turn.route)

    def _carry_on(self, task_context: str, turn: Turn) -> Turn | RunReport:
        """An answer a killed run left in verification: carried on from its saved step
        (checks run again, the reviewer asked again, a saved verdict or feedback used as
        it is), its implementer not asked for it again."""
        pending = self.r.verifier.pending
        assert pending is not None
        self.r.notebook.note(
            f"carrying on the verification of an earlier answer ({pending.phase.value})"
        )
        return self._verified(self.r.verifier.carry_on(task_context), turn)

    def _verified(self, verified: Verified, turn: Turn) -> Turn | RunReport:
        """Feedback: the implementer's next turn, its session resumed, told why. Approved:
        the answer accepted and delivered as any other."""
        if isinstance(verified, RunReport):
            return verified
        if isinstance(verified, Feedback):
            return Turn(turn.number, turn.route, turn.handoff, verified.text)
        approved = verified.verification
        self.r.workplace.hook("after_run", summary=approved.answer["summary"])
        self.r.verifier.accepted()
        # An answer carried on after a restart was judged by the run that got it.
        judged = self.r.attempts.verdict or {
            "judge": "earlier run", "accepted": True,
            "reason": "judged when it was given, before this run carried its verification on",
        }
        return self.r.accepted.accept(
            approved.answer, Route(**approved.route), judged, approved.evidence()
        )

    def _try(
        self, task_context: str, turn: Turn
    ) -> tuple[Attempt, decide.Decision] | RunReport:
        """The turn's attempt and what it means; a provider the storm breaker marks broken
        is not tried (the other one is, or the task cools down)."""
        c, r = self.c, self.r
        broken = r.routing.broken(turn.route.provider)
        if broken is not None:
            r.routing.release()
            decision = decide.after_broken(broken, fell_back=r.routing.fell_back)
            if decision.step is decide.Step.COOLDOWN:
                return r.endings.cooldown(decision.reason, "breaker")
            return Attempt(Classification.UNUSABLE, broken, None, None, None, None, ""), decision
        prompt = contexts.turn_prompts(task_context, turn.handoff, turn.continuation)
        attempt = r.attempts.attempt(turn.route, prompt, c.cwd, turn.number)
        for said in r.spending.unknown_usage.take():
            r.notebook.note(said)
        if r.lease.stop is not None:
            return r.endings.stopped(r.lease.stop)
        accepted, verdict = r.attempts.judge(task_context, attempt, turn.number)
        return attempt, decide.after_attempt(
            attempt.classification,
            attempt.reason,
            attempt.structured,
            accepted=accepted,
            verdict_reason=verdict,
            turn=turn.number,
            goal_turns=c.task.goal_turns,
            time_left=c.deadline - time.monotonic() > c.settings.goal_margin,
            fell_back=r.routing.fell_back,
        )

    def _next_turn(self, task_context: str, turn: Turn, attempt: Attempt, rejection: str) -> Turn:
        """The answer was not accepted and turns are left: another turn, routed afresh and
        told why, with the branch's commits so far."""
        c = self.c
        c.state.reject(rejection)
        number = turn.number + 1
        self.r.notebook.note(
            f"goal turn {number}/{c.task.goal_turns}: turn {turn.number} not accepted "
            f"({rejection})"
        )
        route = self._reroute(task_context, turn.route, rejection)
        continuation = (
            f"Your previous answer was not accepted: {rejection}\n"
            f"Commits on branch {c.branch} so far:\n{self._commit_log() or '(none)'}\n"
            "Reinspect the workspace, finish the outstanding work and answer again."
        )
        return Turn(number, route, self._handoff_for(route.provider, attempt.tail), continuation)

    def _fall_back(
        self, task_context: str, turn: Turn, attempt: Attempt, reason: str
    ) -> Turn | RunReport:
        """The provider could not work (capacity, login, a stall, broken): the other one,
        once, with a handoff; the same goal turn."""
        r = self.r
        r.routing.release()
        try:
            admitted = r.routing.admit(
                task_context, r.routing.fallback(task_context, turn.route, reason)
            )
        except RoutingError as error:
            return r.endings.routing_failed(error)
        if admitted is None:
            return r.endings.abandon_wait()
        # A stall is worth knowing for the next provider (a command that hung); a lost
        # login or an exhausted account is not the task's business.
        stalled = attempt.classification is Classification.STALLED
        return Turn(
            turn.number,
            admitted,
            self._handoff_for(admitted.provider, attempt.tail),
            contexts.after_failure(attempt.reason if stalled else None),
        )

    def _conclude(self, decision: decide.Decision, attempt: Attempt, route: Route) -> RunReport:
        """Carry out the decision that ends the run."""
        step, r = decision.step, self.r
        classification = attempt.classification.value
        if step is decide.Step.ACCEPT:
            assert attempt.structured is not None
            return r.accepted.accept(attempt.structured, route, r.attempts.verdict)
        if step is decide.Step.ABANDON:
            return self.c.report(RunEnd.ABANDON, decision.reason, route.provider)
        if step is decide.Step.COOLDOWN:
            return r.endings.cooldown(decision.reason, classification)
        if step is decide.Step.BLOCK:
            assert decision.kind is not None
            return r.endings.block(decision.reason, decision.kind)
        return r.endings.retry(decision, classification, route.provider)

    def _reroute(self, task_context: str, current: Route, rejection: str) -> Route:
        """Each goal turn is routed afresh, with the rejection and fresh provider health,
        so a turn that needs a stronger model or another provider gets it; a router that
        cannot answer now leaves the turn on the route it had."""
        context = (
            f"{task_context}\n\nThe previous turn was not accepted: {rejection}\n"
            "Choose a route that can finish and verify the remaining work."
        )
        try:
            return self.r.routing.route(context)
        except RoutingError as error:
            self.r.notebook.note(
                f"goal turn stays on {current.provider}/{current.model}: "
                f"routing failed: {redact.shown(str(error))}"
            )
            return current

    def _log_tail(self, size: int = 8192) -> str:
        """The end of the task's provider log: what a restarted task's last provider said."""
        path = self.c.s.home.log_file(self.c.task.board, self.c.task.id)
        try:
            return files.read_tail(path, size).decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def _handoff_for(self, provider: str, tail: str) -> str:
        """A different provider than the last one gets a handoff; the same one resumes."""
        previous = self.c.state.provider
        if previous is None or previous == provider:
            return ""
        return self._handoff(tail)

    def _handoff(self, tail: str) -> str:
        c = self.c
        return handoff.handoff(
            c.worktree, tail, c.branch, owner=c.settings.worker.user, commits=self._commit_log()
        )

    def _commit_log(self) -> str:
        """The branch's commits since the task began, for the next turn or provider."""
        c = self.c
        if not c.on_branch:
            return ""
        return delivery.commit_log(c.worktree, c.state.base, c.settings.worker.user)
