"""What a claim of a task would run, found without claiming it: ``run --dry-run`` and
``task route``.

The same steps as the executor up to the provider's start (lane, provider health,
route, the CLI's argv), each read-only: no claim, no worktree, no lane state
written, no process started. The route is asked of the configured router, so an
HTTP router sees one request per task, like a claim would send. Secrets in the
argv are hidden (``lane_runner/redact.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lane_runner import config, redact
from lane_runner.board.base import Board, HostedBoard
from lane_runner.board.model import Task
from lane_runner.config import Config
from lane_runner.home import Home
from lane_runner.names import is_lane_assignee
from lane_runner.providers import ProviderRequest, adapter
from lane_runner.router import Route, Router, RoutingError, health
from lane_runner.run import context as contexts
from lane_runner.run import lanestate, workspace

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
    if isinstance(board, HostedBoard):  # the host (Hermes) writes the text, makes the workspace
        worktree = Path(f"<Hermes workspace {task.workspace}>")
        task_context = board.worker_context(task.id)
    else:
        worktree = home.worktree(task.board, task.id)
        parents = [board.get_task(parent) for parent in task.parents]
        task_context = contexts.task_context(task, parents, board.comments(task.id))
    found.workspace = str(worktree)
    exclusion = health.excluded_provider(health.read_all(home.provider_health), time.time())
    exclude, why = exclusion if exclusion else (None, None)
    if exclude:
        found.notes.append(f"{exclude} excluded: {why}")
    try:
        route = router.route(task_context, lane, exclude, why)
    except RoutingError as error:
        found.error = redact.text(f"routing failed: {error}")
        return found
    found.route = route.to_dict()
    executable = binaries.get(route.provider)
    if executable is None:
        found.error = f"the {route.provider} CLI is not installed: install it or set its _bin"
        return found
    if refusal := adapter(route.provider).root_refusal(cfg.worker_user):
        found.notes.append(refusal)
    state = lanestate.load(home.lane_dir(task.board), task.board, task.id, 0)
    result_file = home.lane_dir(task.board) / f"{task.id}.run-<R>.provider-<n>.result.json"
    paths = (schema_path, home.settings_file(route.provider))
    overrides = config.cli_overrides(cfg, route.provider)
    argv = _argv(route, executable, worktree, state, result_file, home, paths, overrides)
    found.argv = [redact.text(arg) for arg in argv]
    found.environment = {
        name: redact.setting(name, value)
        for name, value in config.cli_environment(cfg, route.provider).items()
    }
    if task.workspace is None:
        found.notes.append("no workspace: the run would be blocked (capability)")
    if not hosted:
        found.notes.append(f"branch {workspace.branch_name(task.board, task.id)}")
    return found


def _argv(
    route: Route,
    executable: Path,
    worktree: Path,
    state: lanestate.LaneState,
    result_file: Path,
    home: Home,
    paths: tuple[Path, Path],
    overrides: dict[str, Any],
) -> list[str]:
    """The argv the provider adapter builds, the inline schema elided as in the task log."""
    session = state.sessions.get(route.provider)
    resume = bool(session) and state.started.get(route.provider, False)
    request = ProviderRequest(
        provider=route.provider,
        executable=executable,
        model=route.model,
        effort=route.effort,
        prompt="",
        workspace=worktree,
        schema_path=paths[0],
        settings_path=paths[1],
        result_file=result_file,
        session_id=session or NEW_SESSION,
        resume=resume,
        log_path=home.log_file("preview", "preview"),
        env={},
        deadline=0.0,
        config_overrides=overrides,
    )
    return adapter(route.provider).argv(
        request, resume=resume, result_file=result_file, schema="<schema>"
    )
