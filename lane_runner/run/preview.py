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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lane_runner import redact
from lane_runner.board.base import Board, HostedBoard
from lane_runner.board.model import Task
from lane_runner.config import Config
from lane_runner.home import Home
from lane_runner.names import is_lane_assignee
from lane_runner.router import Router, RoutingError
from lane_runner.run import lanestate, plan, workspace

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
    avoid = plan.exclusion(home, lane)
    if avoid:
        found.notes.append(f"{avoid[0]} excluded: {avoid[1]}")
    try:
        route = plan.ask_route(router, plan.task_context(board, task), lane, avoid)
    except RoutingError as error:
        found.error = redact.text(f"routing failed: {error}")
        return found
    found.route = route.to_dict()
    state = lanestate.load(home.lane_dir(task.board), task.board, task.id, 0)
    planned = plan.plan_attempt(route, cfg, home, binaries, state.sessions, state.started)
    if planned.executable is None:
        found.error = planned.unusable
        return found
    if planned.unusable:
        found.notes.append(planned.unusable)
    argv = _argv(planned, planned.executable, cfg, home, task, Path(found.workspace), schema_path)
    found.argv = [redact.text(arg) for arg in argv]
    found.environment = {
        name: redact.setting(name, value) for name, value in planned.settings.items()
    }
    if task.workspace is None:
        found.notes.append("no workspace: the run would be blocked (capability)")
    if not hosted:
        branch = workspace.branch_name(task.board, task.id)
        found.notes.append(
            f"branch {workspace.planned_branch(task.workspace, worktree, branch, cfg.worker_user)}"
        )
    return found


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
        cfg,
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
