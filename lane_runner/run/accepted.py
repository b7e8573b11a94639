"""The accepted result of a run, on its way to the board (docs/ARCHITECTURE.md §6): kept
in the lane state (stage ``accepted``), committed on the task's branch (``delivery``,
after ``branchhead``), journaled (the pending record, stage ``journaled``), finalized on
the board under the lease's bounded tries, then followed up (push, ``after_done``). An
earlier run's result that never reached the journal, kept in the lane state or carried
by its commit on the branch (``undelivered``), is delivered the same way, as this run's.
"""

from __future__ import annotations

import logging
from typing import Any

from journal import FinalizeOutcome
from lane_runner.board.base import BoardUnavailable, ReviewColumn
from lane_runner.board.model import BlockKind, Outcome
from lane_runner.errors import NotFound
from lane_runner.router import Route
from lane_runner.run import branchhead, delivery, fit, followup, handoff, undelivered
from lane_runner.run.claimed import Claimed, RunEnd, RunReport
from lane_runner.run.endings import Endings
from lane_runner.run.lanestate import Delivery
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.spending import Spending
from lane_runner.service import metrics

log = logging.getLogger(__name__)


class Accepted:
    def __init__(
        self, claimed: Claimed, notebook: Notebook, spending: Spending, lease: Lease,
        endings: Endings,
    ) -> None:
        self.c, self.notebook, self.spending = claimed, notebook, spending
        self.lease, self.endings = lease, endings

    def accept(
        self, answer: dict[str, Any], route: Route, verdict: dict[str, Any],
        verification: dict[str, Any] | None = None,
    ) -> RunReport:
        """The accepted answer, its artifacts resolved and cut to fit, is kept in the lane
        state before its commit is made, so a run after a crash finds that commit again
        instead of making a second one. ``verification``: its checks' and review's
        evidence (``run/verifier.py``), kept in its metadata."""
        c = self.c
        result = dict(answer)
        result["artifacts"] = handoff.artifacts(c.worktree, result["artifacts"], base=c.cwd)
        result = fit.fitted(result, c.task.board)
        metadata = self._completion_metadata(result, route, verdict)
        if verification is not None:
            metadata["verification"] = verification
        c.state.accept(result, metadata)
        self.notebook.save()
        return self.deliver()

    def deliver(self) -> RunReport:
        """Commit the accepted result on the task's branch, then hand it to the journal and
        the board (docs/ARCHITECTURE.md §6: the commit comes before the pending record)."""
        c = self.c
        accepted = c.state.delivery
        assert accepted is not None
        result, metadata = accepted.result, dict(accepted.metadata)
        provider = metadata["route"]["provider"]
        if c.on_branch:
            committed = self._commit(accepted)
            if isinstance(committed, RunReport):
                return committed
            metadata["delivery"] = committed.to_dict()
        c.s.journal.write_pending(
            c.task.board, c.task.id, c.run.id, result, result["summary"], metadata
        )
        c.state.journaled(metadata)
        self.notebook.save_if_possible()
        outcome = self.lease.until_landed("result", self._finalize)
        if outcome is None:
            self.endings.note_waiting_result()
            return c.report(
                RunEnd.PENDING, "the board is unavailable; recovery will commit", provider
            )
        if outcome is FinalizeOutcome.COMMITTED:
            try:
                self._follow_up(result["summary"], metadata.get("delivery"))
            finally:
                self._release_hold()
        return c.report(RunEnd(outcome.value), result["summary"], provider)

    def _commit(self, accepted: Delivery) -> delivery.Delivered | RunReport:
        """The result's commit on the task's branch (HEAD brought back to it first); a block
        when git will not have it there.

        Only an earlier run's result can have its commit made already (a crash between the
        commit and the pending record): a run is never resumed after a restart (recovery
        returns it to ready, and the next claim is a new run), so a result this run accepted
        has none yet, and the branch is not searched for it (issue 46: a ``git log``)."""
        c = self.c
        try:
            branchhead.bring_back(c.worktree, c.branch, c.settings.worker.user)
            return delivery.deliver(
                c.worktree,
                c.branch,
                c.state.base,
                self._facts(accepted),
                delivery.Author.of(c.settings.commit_author),
                c.settings.worker.user,
                staged=c.staged,
                made_before=accepted.accepted_run != c.run.id,
            )
        except branchhead.HeadElsewhere as error:
            return self.endings.block(
                f"{error}: put the work on {c.branch} in {c.worktree} and unblock "
                "the task; the accepted result is delivered then",
                BlockKind.NEEDS_INPUT,
            )
        except delivery.DeliveryError as error:
            return self.endings.block(
                f"the accepted result could not be committed: {error}; fix the worktree "
                "and unblock the task, the result is delivered then",
                BlockKind.CAPABILITY,
            )

    def _follow_up(self, summary: str, delivered: dict[str, Any] | None) -> None:
        """The push and the after_done hook (``run/followup.py``); the task is done already."""
        c = self.c
        steps = followup.Steps(c.state, self.notebook.save)
        facts = followup.facts_of(
            c.task.board, c.task.id, c.task.title, c.worktree, c.run.id,
            summary, delivered, steps.key,
        )
        notes = followup.Notes(
            self.notebook.say, lambda: [comment.body for comment in c.board.comments(c.task.id)]
        )
        followup.follow_up(
            c.cfg, facts, delivered, notes, c.s.cancel, steps,
            lambda: c.board.get_task(c.task.id),
        )

    def _release_hold(self) -> None:
        """A result sent to a host's review column is held there while its follow-ups run
        (``ReviewColumn.release_hold``); they ended, so the reviewer may start."""
        c = self.c
        if not isinstance(c.board, ReviewColumn):
            return
        try:
            c.board.release_hold(c.task.id, c.run.id)
        except BoardUnavailable as error:  # the hold expires with the run's lease
            log.info("task %s: review hold not released now (%s)", c.task.id, error)

    def _facts(self, accepted: Delivery) -> delivery.Facts:
        route = accepted.metadata["route"]
        return delivery.Facts(
            board=self.c.task.board,
            task_id=self.c.task.id,
            run_id=accepted.accepted_run,
            title=self.c.task.title,
            summary=accepted.result["summary"],
            provider=route["provider"],
            model=route["model"],
            carried=delivery.Carried(accepted.result, accepted.metadata, self.c.state.base),
        )

    def _finalize(self) -> FinalizeOutcome:
        """One try to commit the accepted result; BoardUnavailable while the board would not."""
        c = self.c
        with metrics.COMMIT_SECONDS.time():
            outcome = c.s.journal.finalize(c.task.board, c.task.id, c.run.id, c.s.commit)
        if outcome is FinalizeOutcome.PENDING:
            raise BoardUnavailable(f"board {c.task.board!r} did not take the result yet")
        return outcome

    def _completion_metadata(
        self, result: dict[str, Any], route: Route, verdict: dict[str, Any]
    ) -> dict[str, Any]:
        """How the result was reached, for whoever reads the board: stored with the
        completed event (and in the journal record, so a replay carries it too)."""
        c = self.c
        return {
            "node": c.s.node,
            "route": {
                "provider": route.provider,
                "model": route.model,
                "effort": route.effort,
                "classifier": route.classifier,
                "reason": route.reason,
            },
            "sessions": dict(c.state.sessions),
            "goal_turn": c.state.goal_turn,
            "goal_turns": c.task.goal_turns,
            "judge": verdict,
            "changed_files": list(result["changed_files"]),
            "tests_run": list(result["tests_run"]),
            "usage": self.spending.summary(),
        }

    # -- an earlier run's result -------------------------------------------------------
    def earlier_result_waits(self) -> bool:
        """An earlier run's result was accepted (and maybe committed) but never reached the
        journal: the runner stopped in between. One the board completed is not waiting."""
        state = self.c.state
        if not state.redeliverable():
            return False
        assert state.delivery is not None
        try:
            earlier = self.c.board.get_run(state.delivery.run)
        except NotFound:
            earlier = None
        if earlier is not None and earlier.outcome is Outcome.COMPLETED:
            state.delivered_elsewhere()
            return False
        return True

    def undelivered_on_branch(self) -> bool:
        """An earlier run's accepted result that its commit on the task's branch carries
        and the board never got (its runner died, maybe in another home): this run takes
        it up to deliver it (``run/undelivered.py``)."""
        c = self.c
        if not c.on_branch:
            return False
        found = undelivered.on_branch(
            c.board, c.worktree, c.task.board, c.task.id, c.run.id, c.settings.worker.user,
        )
        if found is None:
            return False
        c.state.accept(found.carried.result, found.carried.metadata, found.run_id)
        c.state.base = found.carried.base  # the event's diff starts where that run's did
        return True

    def redeliver(self) -> RunReport:
        """Deliver the earlier run's accepted result as this run's, without a provider: its
        commit is found by its trailers, never made twice."""
        c = self.c
        assert c.state.delivery is not None
        earlier = c.state.delivery.accepted_run
        self.notebook.note(
            f"run {earlier}'s accepted result had not reached the journal when its runner "
            "stopped; this run delivers it (its commit is not made twice, its CLI not run again)"
        )
        c.state.redeliver()
        self.notebook.save()
        return self.deliver()
