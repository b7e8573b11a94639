"""Carry one claimed run from route to result (docs/ARCHITECTURE.md §1).

The executor owns one run at a time and lays its life out: the workspace
(``workplace``), what may end the run before any CLI (an earlier result to deliver, no
room on disk, a spent budget, a usage limit, a failing hook), the route and its
provider's slot (``routing``), then the goal-turn loop (``goal``). The rooms it builds
share one ``Claimed`` record: ``notebook`` (comments and lane-state saves), ``spending``
(usage and budgets), ``lease`` (heartbeats, stops, bounded landing), ``endings``,
``attempt`` and ``accepted``. Decisions come from ``decide``, ``waits`` and
``judging`` (pure); the rooms only carry them out, so each step is an effect with a
reason.
"""

from __future__ import annotations

from lane_runner import redact
from lane_runner.board.base import BoardUnavailable, WorkspaceUnusable
from lane_runner.board.model import BlockKind, Claim, Task
from lane_runner.config import Config
from lane_runner.router import RoutingError
from lane_runner.run import command, hostedfollow, plan, verifying, workflow, workspace
from lane_runner.run.accepted import Accepted
from lane_runner.run.attempt import Attempts
from lane_runner.run.claimed import Claimed, RunEnd, RunReport
from lane_runner.run.endings import Endings
from lane_runner.run.goal import GoalLoop, Rooms
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.routing import Routing
from lane_runner.run.spending import Spending
from lane_runner.run.verifier import Verifier
from lane_runner.run.workplace import Workplace
from lane_runner.service.services import Services, Tools

__all__ = ["RunEnd", "RunExecutor", "RunReport"]


class RunExecutor:
    """One claimed run. ``execute()`` says what happened; provider trouble never raises."""

    def __init__(
        self,
        services: Services,
        claim: Claim,
        cfg: Config | None = None,
        tools: Tools | None = None,
    ) -> None:
        """``cfg``: the configuration the claim was made under (the daemon's, at the
        claim), and ``tools`` the router, judge and CLIs held with it; by default those
        in force now."""
        self.c = c = Claimed.of(services, claim, cfg or services.cfg, tools)
        notebook, spending = Notebook(c), Spending(c)
        lease = Lease(c, notebook, spending)
        endings = Endings(c, notebook, spending, lease)
        attempts = Attempts(c, notebook, spending, lease)
        routing = Routing(c, notebook, lease)
        self.r = Rooms(
            notebook=notebook,
            spending=spending,
            lease=lease,
            endings=endings,
            routing=routing,
            attempts=attempts,
            accepted=Accepted(c, notebook, spending, lease, endings),
            workplace=Workplace(c, notebook),
            verifier=Verifier(c, notebook, attempts, lease, endings,
                              verifying.policy_of(c.cfg, c.task.board), routing),
        )

    @property
    def task(self) -> Task:
        """The claimed task."""
        return self.c.task

    def execute(self) -> RunReport:
        endings = self.r.endings
        try:
            return self._execute()
        except OSError as error:
            return endings.storage_failed(error)
        except BoardUnavailable as error:
            return endings.hand_back(error)
        except command.Cancelled as error:
            return endings.cut_short(error)
        finally:
            self.c.s.forget_run(self.c.run.id)

    def _execute(self) -> RunReport:
        c, r = self.c, self.r
        if not hostedfollow.before_run(c.s, c.board, c.task):
            # this run's lane state would hold them no more: the run waits for them
            why = "the task's earlier result still owes its follow-ups (its push, after_done)"
            return r.endings.requeue_soon(why, why)
        prepared = self._prepared()
        if isinstance(prepared, RunReport):
            return prepared
        ended = self._before_any_cli(prepared)
        if ended is not None:
            return ended
        c.s.breaker.succeeded(*r.endings.workspace_scopes())
        found = workflow.read(c.worktree, c.state.base, c.settings.worker.user) if c.on_branch \
            else workflow.Workflow()
        task_context = r.verifier.adopt(found, plan.task_context(c.board, c.task))
        try:
            route = r.routing.admit(task_context, r.verifier.routed(r.routing.route(task_context)))
        except RoutingError as error:
            return r.endings.routing_failed(error)
        if route is None:
            return r.endings.abandon_wait()
        try:
            return GoalLoop(c, r).work(prepared, task_context, route)
        finally:
            r.routing.release()

    def _prepared(self) -> workspace.Workspace | RunReport:
        """The run's workspace; another current run's, or one that cannot be made, ends it."""
        endings = self.r.endings
        try:
            return self.r.workplace.prepare()
        except workspace.WorkspaceBusy as error:
            # Another current run holds the task's branch: try later, not a counted failure.
            return endings.requeue_soon(str(error), f"workspace busy: {error}")
        except (workspace.WorkspaceError, WorkspaceUnusable) as error:
            if self.c.task.workspace is not None:  # none: the operator's slip, not a storm
                endings.file_failure(*endings.workspace_scopes(), "workspace", str(error))
            return endings.block(str(error), BlockKind.CAPABILITY)

    def _before_any_cli(self, prepared: workspace.Workspace) -> RunReport | None:
        """What ends the run before any CLI runs: an earlier result to deliver, too little
        room on disk, a spent budget, every provider under a usage limit, a failing hook."""
        r = self.r
        if r.accepted.earlier_result_waits() or r.accepted.undelivered_on_branch():
            return r.accepted.redeliver()
        short = r.workplace.no_room()
        if short is not None:
            return r.endings.requeue_soon(short, redact.shown(short))
        r.spending.share()
        spent = r.spending.spent_before_any_cli()
        if spent is not None:
            return r.endings.budget_spent(spent)
        wait = r.attempts.limit_wait()
        if wait is not None:
            return r.endings.park(*wait)
        unfit = r.workplace.before_work(prepared)
        if unfit is not None:
            return r.endings.hook_failed(unfit, prepared)
        return None
