"""A completed answer through its acceptance checks and its review before it is accepted
(docs/verification.md): the room that carries ``verifying``'s decisions out.

Each step's outcome is saved in the lane state (``verification``) before the next step
begins, so a runner killed in the middle repeats only that step on the next claim: the
checks run again, the reviewer is asked again, a saved verdict or feedback is carried
on without asking anyone again. An answer whose review is on is accepted only from
``APPROVED``, so an unreviewed result is never delivered.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from lane_runner.board.model import BlockKind, Outcome
from lane_runner.names import PROVIDERS
from lane_runner.providers import Attempt, Classification
from lane_runner.router import Route
from lane_runner.run import (
    checks,
    command,
    review,
    reviewrun,
    verification,
    verifying,
    workflow,
)
from lane_runner.run.attempt import Attempts
from lane_runner.run.claimed import Claimed, RunEnd, RunReport
from lane_runner.run.endings import Endings
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.routing import Routing
from lane_runner.run.verification import REVIEW, Phase, Verdict, Verification

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Approved:
    """Checks passed and, with review on, a reviewer approved: accept ``answer``."""

    verification: Verification


@dataclass(frozen=True)
class Feedback:
    """The implementer's next turn (its session resumed) is told ``text``."""

    text: str


Verified = Approved | Feedback | RunReport


class Verifier:
    def __init__(
        self, claimed: Claimed, notebook: Notebook, attempts: Attempts, lease: Lease,
        endings: Endings, policy: verifying.Policy, routing: Routing | None = None,
    ) -> None:
        self.c, self.notebook, self.attempts = claimed, notebook, attempts
        self.lease, self.endings, self.policy = lease, endings, policy
        self.routing = routing  # the run's slot, moved to its reviewer's provider meanwhile
        self.workflow = workflow.Workflow()  # the repository's, once ``adopt`` read it

    def routed(self, route: Route) -> Route:
        """``route`` with the workflow file's model for its provider, where it names one
        and the configuration does not (``workflow.model_for``)."""
        model = workflow.model_for(self.c.cfg, self.workflow, route.provider)
        if model is None or model == route.model:
            return route
        self.notebook.note(f"model {model} for {route.provider}, as {workflow.PATH} says")
        return replace(route, model=model, reason=f"{route.reason}; model from {workflow.PATH}")

    def adopt(self, found: workflow.Workflow, task_context: str) -> str:
        """The repository's workflow file (read from the task's base): the policy as it
        and the board's settings resolve, and the task's context with its instructions."""
        c = self.c
        if found.problem:
            self.notebook.note(f"the repository's workflow file is ignored: {found.problem}")
        self.workflow = found
        self.policy = workflow.resolve(
            c.cfg, c.task.board, found, workflow.task_settings(c.task)
        ).policy
        said = workflow.instructions(found, workflow.fields_of(c.task, c.branch))
        return f"{task_context}\n\n{workflow.HEADING}\n{said}" if said else task_context

    @property
    def pending(self) -> Verification | None:
        """An answer a killed run left in verification: this run carries it on."""
        return self.c.state.verification

    def verify(self, answer: dict[str, Any], route: Route, task_context: str) -> Verified:
        """A new completed answer of ``route``'s: its checks, then its review."""
        routed = route.to_dict()
        earlier = self.c.state.verification
        self._save(verification.first(answer, routed) if earlier is None
                   else earlier.next_answer(answer, routed))
        return self.carry_on(task_context)

    def carry_on(self, task_context: str) -> Verified:
        """From wherever the saved verification stands to feedback, approval or an end."""
        while True:
            pending = self.c.state.verification
            assert pending is not None
            match pending.phase:
                case Phase.FEEDBACK:
                    return Feedback(pending.feedback)
                case Phase.APPROVED:
                    return Approved(pending)
                case Phase.CHECKING:
                    ended = self._check(pending)
                case Phase.REVIEWING:
                    ended = self._review(pending, task_context)
            if ended is not None:
                return ended

    def accepted(self) -> None:
        """The approved answer is kept as the accepted result (saved with it)."""
        self.c.state.verification = None

    # -- the steps ---------------------------------------------------------------------
    def _check(self, pending: Verification) -> RunReport | None:
        c, policy = self.c, self.policy
        facts = checks.facts_for(c.task.board, c.task.id, c.task.title, c.branch,
                                 c.worktree, c.run.id)
        try:
            with self._beating() as lost, command.also_ended_by(c.cancel):
                runs = checks.run_all(
                    policy.checks, facts, timeout=policy.check_timeout,
                    owner=c.settings.worker.user, passes=c.settings.worker.env,
                    egress=c.settings.worker.egress,
                )
        except command.Cancelled:
            if self.lease.stop is None:
                raise  # the shutdown: the checks run again on the next start
            return self.endings.stopped(self.lease.stop)
        if lost.is_set():
            return c.report(RunEnd.ABANDON, "the lease was lost during the acceptance checks")
        if runs:
            failed = [run for run in runs if not run.passed]
            self.notebook.note(
                f"acceptance checks: {len(runs) - len(failed)} of {len(runs)} passed"
                + "".join(f"; `{run.command}` {run.ended}" for run in failed)
            )
        step = verifying.after_checks(runs, pending.check_turns, policy)
        checked = pending.checked(runs)
        fed = 1 if step.phase is Phase.FEEDBACK else 0
        return self._after(replace(checked, check_turns=checked.check_turns + fed), step)

    def _review(self, pending: Verification, task_context: str) -> RunReport | None:
        c = self.c
        implementer = str(pending.route["provider"])
        unusable = review.unusable(c.s.home, c.tools.binaries, time.time())
        reviewer = verifying.choose_reviewer(self.policy.review, implementer, PROVIDERS, unusable)
        if reviewer is None:
            return self.endings.cooldown("no provider is usable to review the result", "review")
        if reviewer not in PROVIDERS:  # a task's setting names a CLI this runner has not
            return self.endings.block(
                f"review names {reviewer!r}, a provider this runner does not know (it knows "
                f"{', '.join(PROVIDERS)}): change the task's review setting",
                BlockKind.CAPABILITY)
        route = review.route_for(c.cfg, reviewer, str(pending.route.get("effort", "medium")))
        change = review.change_since(c.worktree, c.state.base, c.settings.worker.user)
        c.staged = change.staged  # the commit's, while the worktree holds exactly it
        asked = review.prompt(task_context, pending.answer["summary"], change.stat, change.diff,
                              pending.latest.checks)
        try:
            attempt = self._reviewer(route, asked)
        except reviewrun.NotTheTasks as lost:
            return c.report(RunEnd.ABANDON, str(lost), reviewer)
        if self.lease.stop is not None:
            return self.endings.stopped(self.lease.stop)
        if attempt.classification in (Classification.LEASE_LOST, Classification.CANCELLED):
            return c.report(RunEnd.ABANDON, attempt.reason, reviewer)
        if attempt.classification is not Classification.OK or attempt.structured is None:
            # The review is asked again by the next run; the answer waits in the lane state.
            return self.endings.cooldown(
                f"the reviewer ({reviewer}) gave no verdict: {attempt.reason}", "review")
        verdict = Verdict.answered(reviewer, route.model, attempt.structured)
        self.notebook.note(
            f"review by {reviewer}/{route.model}: {verdict.verdict}: {verdict.summary}"
            + "".join(f"\n- [{f.severity}] {f.where()}: {f.text}" for f in verdict.findings)
        )
        step = verifying.after_review(verdict, pending.review_rounds, self.policy)
        reviewed = pending.reviewed(verdict)
        fed = 1 if step.phase is Phase.FEEDBACK else 0
        return self._after(replace(reviewed, review_rounds=reviewed.review_rounds + fed), step)

    def _reviewer(self, route: Route, asked: str) -> Attempt:
        """The reviewer's attempt, in a review run of its own where the board has them
        (``run/reviewrun.py``; the implementer's lease kept meanwhile by heartbeats),
        else as an attempt of this run; the run's slot is the reviewer's provider's
        meanwhile (``Routing.move_to``), then its implementer's again."""
        routing, implementer = self.routing, self.routing and self.routing.held
        if routing is not None and not routing.move_to(route.provider):
            return Attempt(Classification.CANCELLED, "stopping, or the lease lost, while "
                           f"waiting for a {route.provider} slot to review", None, None, None,
                           None, "")
        try:
            return self._reviewed(route, asked)
        finally:
            if routing is not None and implementer:
                routing.move_to(implementer)  # a stop or a lost lease is the next step's

    def _reviewed(self, route: Route, asked: str) -> Attempt:
        c = self.c
        reviewing = reviewrun.begin(c)
        if reviewing is None:
            return self.attempts.attempt(route, asked, c.cwd, c.state.goal_turn, role=REVIEW)
        outcome, reason = Outcome.FAILED, "the review ended by an error"
        try:
            with self._beating():
                attempt = reviewing.attempts.attempt(route, asked, c.cwd, c.state.goal_turn,
                                                     role=REVIEW)
            said = attempt.structured if attempt.classification is Classification.OK else None
            verdict = None if said is None else f"{said.get('verdict')}: {said.get('summary')}"
            outcome, reason = reviewrun.ending(attempt, verdict)
        finally:
            reviewing.end(outcome, reason)
        return attempt

    def _after(self, done: Verification, step: verifying.Next) -> RunReport | None:
        """The step's outcome saved (its turn or round counted in the same save), or the
        block it ends in."""
        if step.kind is not None:  # the block forgets the verification: a person takes over
            return self.endings.block(step.reason, step.kind)
        assert step.phase is not None
        self._save(replace(done, phase=step.phase, feedback=step.feedback))
        return None

    def _save(self, pending: Verification) -> None:
        self.c.state.verification = pending
        self.notebook.save()

    @contextlib.contextmanager
    def _beating(self) -> Iterator[threading.Event]:
        """Heartbeats while the checks run (they may outlast a lease); the event is set
        when one found the lease lost."""
        lost, done = threading.Event(), threading.Event()

        def beat() -> None:
            while not done.wait(self.c.settings.heartbeats.interval):
                if not self.lease.heartbeat():
                    lost.set()
                    return

        beater = threading.Thread(target=beat, name=f"checks-{self.c.run.id}", daemon=True)
        beater.start()
        try:
            yield lost
        finally:
            done.set()
            beater.join()
