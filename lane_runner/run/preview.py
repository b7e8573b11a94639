"""What a claim of a task would run, found without claiming it: ``run --dry-run`` and
``task route``.

The same steps as the executor up to the provider's start, through the same
functions (``run/plan.py``: context, provider-health exclusion, route, the planned
attempt and its argv; the task's branch as ``workspace.planned_branch`` finds it),
each read-only: no claim, no worktree, no lane state written, no process started.
The route is asked of the configured router, so an HTTP router sees one request per
task, like a claim would send. Secrets in the argv are hidden
(``lane_runner/redact.py``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lane_runner import redact
from lane_runner.board.base import Board, HostedBoard
from lane_runner.board.model import Task
from lane_runner.config import Config
from lane_runner.home import Home
from lane_runner.names import PROVIDERS, is_lane_assignee
from lane_runner.router import Route, Router, RoutingError
from lane_runner.run import context as contexts
from lane_runner.run import lanestate, pin, plan, review, verifying, workflow, workspace
from lane_runner.run.slices import Supervisor

NEW_SESSION = "<reserved at the first start>"


@dataclass
class Preview:
    board: str
    task_id: str
    title: str
    lane: str | None
    route: dict[str, Any] | None = None
    argv: list[str] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    """What ``<provider>_env`` sets for the CLI (credentials hidden)."""
    workspace: str | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    prompt: str | None = None
    """What the worker's first turn would be told."""
    resumed_prompt: str | None = None
    """What a later turn that resumes the worker's session is told (a placeholder for what
    only the run knows: the check's output, the findings, the reason)."""
    verification: dict[str, Any] | None = None
    """The checks and review its answers would meet, where each setting came from, the
    reviewer that would run and what it would be told (docs/verification.md)."""


def preview(
    task: Task,
    board: Board,
    *,
    cfg: Config,
    router: Router,
    binaries: dict[str, Path | None],
    schema_path: Path,
) -> Preview:
    """The route and argv a claim of ``task`` would use now; never raises for routing."""
    lane = task.assignee or cfg.default_assignee or None
    found = Preview(task.board, task.id, task.title, lane)
    if lane is None or not is_lane_assignee(lane):
        found.error = f"assignee {lane or '(none)'} is no cli-* lane: never claimed here"
        return found
    home = Home(cfg.home)
    hosted = isinstance(board, HostedBoard)
    worktree = home.worktree(task.board, task.id)
    # The host (Hermes) makes the workspace; the CLI works where the host says.
    found.workspace = (
        f"<Hermes workspace {task.workspace}>" if hosted
        else str(workspace.planned_cwd(task.workspace, worktree, cfg.worker_user))
    )
    found_workflow = _workflow(task, hosted, home, cfg)
    context = _context(found, board, task, found_workflow)
    route = _route(found, home, router, context, lane, task, cfg, found_workflow)
    if route is None:
        return found
    found.route = route.to_dict()
    found.verification = _verification(cfg, task, found_workflow, route, binaries, context)
    if _command(found, route, task, cfg, home, binaries, schema_path):
        _workspace_notes(found, task, hosted, worktree, cfg)
    return found


def _context(
    found: Preview, board: Board, task: Task, found_workflow: workflow.Workflow
) -> str:
    """The task's context with the workflow file's instructions, and the worker's prompt
    from it shown."""
    context = plan.task_context(board, task)
    said = workflow.instructions(
        found_workflow, workflow.fields_of(task, workspace.branch_name(task.board, task.id))
    )
    context = f"{context}\n\n{workflow.HEADING}\n{said}" if said else context
    found.prompt = contexts.worker_prompt(context)
    found.resumed_prompt = contexts.resumed_prompt(contexts.WHAT_IS_NEW)
    return context


def _route(
    found: Preview, home: Home, router: Router, context: str, lane: str, task: Task,
    cfg: Config, found_workflow: workflow.Workflow,
) -> Route | None:
    """The route a claim would take now: a provider a recent failure excludes noted, the
    workflow's model, then the task's own pin; None when routing fails (``found.error``)."""
    avoid = plan.exclusion(home, lane)
    if avoid:
        found.notes.append(f"{avoid[0]} excluded: {avoid[1]}")
    try:
        route = plan.ask_route(router, context, lane, avoid)
    except RoutingError as error:
        found.error = redact.text(f"routing failed: {error}")
        return None
    model = workflow.model_for(cfg, found_workflow, route.provider)
    if model is not None and model != route.model:
        route = dataclasses.replace(route, model=model)
        found.notes.append(f"model {model} from {workflow.PATH}")
    pinned = pin.pin(route, pin.asked_of(task))
    found.notes.extend(pinned.said)
    return pinned.route


def _command(
    found: Preview,
    route: Route,
    task: Task,
    cfg: Config,
    home: Home,
    binaries: dict[str, Path | None],
    schema_path: Path,
) -> bool:
    """The argv and environment the route's CLI would start with (redacted); False when
    the CLI cannot run (``found.error`` says why)."""
    state = lanestate.load(home.lane_dir(task.board), task.board, task.id, 0)
    planned = plan.plan_attempt(route, cfg, home, binaries, state.sessions, state.started)
    if planned.executable is None:
        found.error = planned.unusable
        return False
    if planned.unusable:
        found.notes.append(planned.unusable)
    where = Path(found.workspace or "")
    argv = _argv(planned, planned.executable, cfg, home, task, where, schema_path)
    found.argv = [redact.text(arg) for arg in argv]
    found.environment = {
        name: redact.setting(name, value) for name, value in planned.settings.items()
    }
    return True


def _workspace_notes(
    found: Preview, task: Task, hosted: bool, worktree: Path, cfg: Config
) -> None:
    """A task with no workspace would be blocked; a worktree of ours names its branch."""
    if task.workspace is None:
        found.notes.append("no workspace: the run would be blocked (capability)")
    if not hosted:
        branch = workspace.branch_name(task.board, task.id)
        found.notes.append(
            f"branch {workspace.planned_branch(task.workspace, worktree, branch, cfg.worker_user)}"
        )


def _workflow(task: Task, hosted: bool, home: Home, cfg: Config) -> workflow.Workflow:
    """The workflow file at the commit a run would start from: the lane state's base, else
    the workspace's HEAD."""
    if hosted or task.workspace is None:
        return workflow.Workflow()
    state = lanestate.load(home.lane_dir(task.board), task.board, task.id, 0)
    return workflow.read(Path(task.workspace), state.base or "HEAD", cfg.worker_user)


def _verification(
    cfg: Config, task: Task, found: workflow.Workflow, route: Route,
    binaries: dict[str, Path | None], context: str,
) -> dict[str, Any]:
    resolved = workflow.resolve(cfg, task.board, found, workflow.task_settings(task))
    policy = resolved.policy
    shown: dict[str, Any] = {
        "checks": list(policy.checks), "review": policy.review,
        "check_turns": policy.check_turns, "review_rounds": policy.review_rounds,
        "sources": dict(resolved.sources), "workflow_problem": found.problem,
        "reviewer": None, "review_prompt": None,
    }
    if policy.reviews:
        unusable = review.unusable(Home(cfg.home), binaries, time.time())
        reviewer = verifying.choose_reviewer(policy.review, route.provider, PROVIDERS, unusable)
        if reviewer is not None:
            reviewed_by = review.route_for(cfg, reviewer, route.effort)
            shown["reviewer"] = {"provider": reviewer, "model": reviewed_by.model}
            shown["review_prompt"] = review.prompt(
                context, "<the implementer's summary>", "<the diff stat since the base>",
                "<the diff since the base>", [],
            )
    return shown


def _argv(
    planned: plan.AttemptPlan,
    executable: Path,
    cfg: Config,
    home: Home,
    task: Task,
    worktree: Path,
    schema_path: Path,
) -> list[str]:
    """The argv the adapter builds for the planned start, the inline schema elided as in
    the task log, the run's and the attempt's numbers as placeholders."""
    if planned.reserved:
        planned = dataclasses.replace(planned, session_id=NEW_SESSION)
    result_file = plan.result_file(cfg, home, task, "<R>", "<n>")
    request = plan.request(
        planned,
        Supervisor.of(cfg),
        executable=executable,
        prompt="",
        workspace=worktree,
        schema_path=schema_path,
        result_file=result_file,
        retry_result_file=None,
        log_path=home.log_file("preview", "preview"),
        env={},
        deadline=0.0,
    )
    return planned.cli.argv(
        request, resume=planned.resume, result_file=result_file, schema="<schema>"
    )
