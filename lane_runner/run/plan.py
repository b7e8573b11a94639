"""Plan one attempt: what the executor starts, and what ``run --dry-run`` shows.

The executor and the dry run (``run/preview.py``) both read the task's context,
ask the route with the same provider-health exclusion, and plan the attempt here
(the CLI, whether it can start, the session it resumes or reserves, the
operator's settings for it, the result file), so the dry run shows what a run
would do and cannot drift from it. Reading the board and the provider health and
asking the router are the effects; the plan reads only the configuration and the
lane state (and draws a session id for a CLI the runner names sessions for).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal import names as journal_names
from lane_runner import config
from lane_runner.board.base import Board, HostedBoard
from lane_runner.board.model import Task
from lane_runner.config import Config
from lane_runner.home import Home
from lane_runner.names import AUTO_ASSIGNEE, PROVIDERS
from lane_runner.providers import Provider, ProviderRequest, adapter, sandbox
from lane_runner.router import Route, Router, health
from lane_runner.run import context as contexts
from lane_runner.run import ownership, pin
from lane_runner.run.slices import Supervisor
from lane_runner.service import breaker


def task_context(board: Board, task: Task) -> str:
    """What the worker and the router are told of ``task``: the host's text for a hosted
    board (Hermes), else the task with its parents and comments; the skills it names
    (``run/pin.py``)."""
    if isinstance(board, HostedBoard):
        told = board.worker_context(task.id)
    else:
        parents = [board.get_task(parent) for parent in task.parents]
        told = contexts.task_context(task, parents, board.comments(task.id))
    skills = pin.prompt_section(pin.asked_of(task))
    return f"{told}\n\n{skills}" if skills else told


def exclusion(home: Home, lane: str, now: float | None = None) -> tuple[str, str] | None:
    """The provider the route must avoid for ``lane`` now, with why (automatic lanes only):
    one freshly unavailable (``router/health.py``), else the one the storm breaker marks
    broken (``service/breaker.py``; with both broken the daemon claims nothing)."""
    moment = time.time() if now is None else now
    healths = health.read_all(home.provider_health)
    return health.exclusion_for(lane, healths, moment) or _broken(home, lane, moment)


def _broken(home: Home, lane: str, now: float) -> tuple[str, str] | None:
    if lane != AUTO_ASSIGNEE:
        return None
    trips = breaker.read(home.breaker_file)
    broken = [
        (provider, trip.describe())
        for provider in PROVIDERS
        if (trip := trips.get(breaker.scope(breaker.PROVIDER, provider))) and now < trip.probe_at
    ]
    return broken[0] if len(broken) == 1 else None


def ask_route(router: Router, task_context: str, lane: str, avoid: tuple[str, str] | None) -> Route:
    """The router's route for ``lane``, told to avoid ``avoid``'s provider."""
    exclude, why = avoid if avoid else (None, None)
    return router.route(task_context, lane, exclude, why)


def result_file(cfg: Config, home: Home, task: Task, run: int | str, n: int | str) -> Path:
    """Where the CLI writes its answer in attempt ``n`` (codex ``-o``).

    A worker user may not write into the journal's directory (it could plant entries
    there), so its CLI writes beside its worktree; the executor keeps the answer in
    the journal as the candidate and removes the file when the attempt ends.
    """
    name = journal_names.provider_result(task.id, run, n)
    if cfg.worker_users:  # a pool: an outbox of the task's own (run/ownership.py)
        return ownership.outbox_of(home.worktree(task.board, task.id)) / name
    if cfg.worker_user:
        return home.worktree(task.board, task.id).parent / f".{name}"
    return home.lane_dir(task.board) / name


def root_refusal(cfg: Config, cli: Provider) -> str | None:
    """Why ``cli`` cannot start here as root, or None: judged with the environment its
    attempts get, the runner's and ``<provider>_env`` (a throw-away home such as the
    demo's declares its sandbox there, so every run on it, and ``doctor``, agree)."""
    environ = {**os.environ, **config.cli_environment(cfg, cli.name)}
    return cli.root_refusal(cfg.worker_user, environ=environ)


def unsandboxable(cfg: Config) -> str | None:
    """Why no attempt can start: ``isolation = sandbox`` is set and this host cannot make
    one (an attempt never runs with less isolation than the operator asked for)."""
    if cfg.simulate or cfg.isolation != sandbox.SANDBOX:
        return None
    why = sandbox.unavailable(cfg.worker_user)
    return f"isolation = sandbox, but {why}" if why else None


@dataclass(frozen=True)
class AttemptPlan:
    """One attempt of ``route``, decided before anything starts."""

    route: Route
    cli: Provider
    executable: Path | None
    """The CLI to run; None: it is not installed (``unusable`` says so)."""
    unusable: str | None
    """Why this CLI cannot start here (not installed, refuses root), or None."""
    session_id: str | None
    reserved: bool
    """``session_id`` is new, reserved by this plan: persist it before the first start."""
    resume: bool
    settings: Mapping[str, str]
    """``<provider>_env``: what the operator sets in this CLI's environment."""
    overrides: Mapping[str, Any]
    """``<provider>_config``: the CLI's own settings the runner hands it."""
    sandbox: str | None
    """``<provider>_sandbox``: the CLI's own sandbox mode; None: it has none to choose."""
    settings_path: Path

    @property
    def provider(self) -> str:
        return self.route.provider


def plan_attempt(
    route: Route,
    cfg: Config,
    home: Home,
    binaries: Mapping[str, Path | None],
    sessions: Mapping[str, str],
    started: Mapping[str, bool],
) -> AttemptPlan:
    """The attempt ``route`` gets with the lane state's ``sessions`` and ``started``."""
    provider = route.provider
    cli = adapter(provider)
    executable = binaries.get(provider)
    unusable = (
        f"the {provider} CLI is not installed: install it or set {provider}_bin"
        if executable is None
        else root_refusal(cfg, cli) or unsandboxable(cfg)
    )
    session = sessions.get(provider)
    reserved = session is None and (session := cli.new_session()) is not None
    return AttemptPlan(
        route=route,
        cli=cli,
        executable=executable,
        unusable=unusable,
        session_id=session,
        reserved=reserved,
        resume=bool(session) and not reserved and started.get(provider, False),
        settings=config.cli_environment(cfg, provider),
        overrides=config.cli_overrides(cfg, provider),
        sandbox=config.cli_sandbox(cfg, provider),
        settings_path=home.settings_file(provider),
    )


def request(
    plan: AttemptPlan,
    supervisor: Supervisor,
    *,
    executable: Path,
    prompt: str,
    workspace: Path,
    schema_path: Path,
    result_file: Path,
    retry_result_file: Path | None,
    log_path: Path,
    env: dict[str, str],
    deadline: float,
    worktree: Path | None = None,
) -> ProviderRequest:
    """The ``ProviderRequest`` of ``plan``, with the ``supervisor``'s limits; the
    executor adds its callbacks (heartbeat, session, progress, cancel)."""
    return ProviderRequest(
        provider=plan.provider,
        executable=executable,
        model=plan.route.model,
        effort=plan.route.effort,
        prompt=prompt,
        workspace=workspace,
        schema_path=schema_path,
        settings_path=plan.settings_path,
        result_file=result_file,
        retry_result_file=retry_result_file,
        session_id=plan.session_id,
        resume=plan.resume,
        log_path=log_path,
        env=env,
        config_overrides=dict(plan.overrides),
        sandbox=plan.sandbox,
        simulated=supervisor.simulated,
        heartbeat_interval=supervisor.heartbeat_interval,
        stall_timeout=supervisor.stall_timeout,
        tool_stall_timeout=supervisor.tool_stall_timeout,
        busy_cpu=supervisor.busy_cpu,
        closing_grace=supervisor.closing_grace,
        deadline=deadline,
        rotate_bytes=supervisor.rotate_bytes,
        run_as=supervisor.run_as,
        isolated=supervisor.isolated,
        worktree=worktree,
        egress_allow=supervisor.egress_allow,
    )
