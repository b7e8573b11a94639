"""The records that cross the providers boundary: one request in, one attempt out.

The daemon builds a ``ProviderRequest`` per attempt and gets back an ``Attempt``;
everything between (argv, streams, classification, process trees) stays inside
``providers``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from lane_runner.providers.egress import Destination
from lane_runner.providers.reading import WORKER_ANSWER, AnswerShape
from lane_runner.providers.usage import LimitNotice, UsageReport


class Classification(StrEnum):
    """Why an attempt ended, as the daemon acts on it (retry, fall back, block)."""

    OK = "ok"
    CAPACITY = "capacity"
    AUTH = "auth"
    SESSION_MISSING = "session_missing"
    SESSION_COLLISION = "session_collision"
    STALLED = "stalled"
    TIMED_OUT = "timed_out"
    LEASE_LOST = "lease_lost"
    KILLED_BY_SIGNAL = "killed_by_signal"
    CANCELLED = "cancelled"
    FAILED = "failed"
    REFUSED = "refused"
    """The model API refused the request itself (the task overflows the model's context
    window, an invalid request): any retry would be refused the same way."""
    MISCONFIGURED = "misconfigured"
    """The CLI refused the runner's own invocation (unknown option, invalid schema, root
    refusal): the runner or the host is wrong, not the task."""
    UNUSABLE = "unusable"
    """The lane cannot start this provider here at all (CLI missing, root without a
    worker user); decided before any process starts."""


@dataclass(frozen=True)
class Progress:
    """Liveness of a running attempt, for ``status``: monotonic clock readings."""

    started: float
    last_heartbeat: float | None
    last_event: float | None
    pid: int | None
    clock: str = "stall"
    """The stall clock that runs: ``stall``, or ``tool`` while a tool call is in flight."""
    stall_limit: float | None = None
    """That clock's limit in seconds."""
    last_busy: float | None = None
    """When the attempt's processes were last found using CPU, if ever."""


def _always_alive() -> bool:
    return True


def _ignore_session(_session_id: str) -> None:
    return None


def _ignore_usage(_report: UsageReport) -> None:
    return None


@dataclass
class ProviderRequest:
    """One provider CLI attempt, fully described; ``run_attempt`` does the rest."""

    provider: str
    executable: Path
    model: str
    effort: str
    prompt: str
    workspace: Path
    schema_path: Path
    """The wire schema file (``worker-result.wire.json``) both CLIs are handed."""
    settings_path: Path
    """The settings file the runner writes for ``claude --settings``; codex has none."""
    result_file: Path
    session_id: str | None
    resume: bool
    log_path: Path
    env: dict[str, str]
    deadline: float
    heartbeat: Callable[[], bool] = _always_alive
    on_session: Callable[[str], None] = _ignore_session
    heartbeat_interval: float = 20.0
    stall_timeout: float = 900.0
    tool_stall_timeout: float = 3600.0
    """The stall limit while one of the CLI's tool calls is in flight."""
    busy_cpu: float = 0.0
    """CPU-seconds per second above which a quiet attempt is working; 0: events only."""
    rotate_bytes: int = 64 * 1024 * 1024
    cancel: threading.Event | None = None
    run_as: str | None = None
    on_progress: Callable[[Progress], None] | None = None
    kill_grace: float = 5.0
    config_overrides: Mapping[str, Any] = field(default_factory=dict)
    """The operator's settings of the CLI's own configuration (``codex_config``, flat
    dotted keys): codex gets each as ``-c key=value``; claude takes its settings from
    the environment instead."""
    sandbox: str | None = None
    """The CLI's own sandbox mode (``<provider>_sandbox``); None: the adapter's default."""
    simulated: bool = False
    """The executable is a bundled simulator (``simulate``): nothing is written for it in
    the worker's home (codex's rules file), which may be a person's own."""
    closing_grace: float = 5.0
    """How long the CLI may take to exit after its final answer before its tree is ended."""
    on_usage: Callable[[UsageReport], None] = _ignore_usage
    """Called with each usage figure the moment the CLI reports it (the ledger's input)."""
    max_budget_usd: float | None = None
    """What is left of the task's dollar budget, for a CLI that can stop itself there."""
    retry_result_file: Path | None = None
    """Codex ``-o`` file for the fresh thread after an unknown-thread resume;
    defaults to a sibling of ``result_file`` so no file is ever written twice."""
    isolated: bool = False
    """Each start runs in a sandbox of its own (``isolation = sandbox``, ``sandbox.py``)."""
    worktree: Path | None = None
    """The task's worktree (``workspace`` may be a folder in it): writable in the sandbox."""
    egress_allow: tuple[Destination, ...] = ()
    """The hosts a sandboxed CLI may reach through the egress proxy (``egress.py``)."""
    whole_prompt: str | None = None
    """The prompt a new session needs when ``prompt`` is for a resumed one (only what is
    new): what the fresh start after a lost session gets; None: ``prompt`` either way."""
    answer: AnswerShape = WORKER_ANSWER
    """The answer the attempt ends with: a worker's result, or a reviewer's verdict
    (``schema_path`` is then that answer's wire schema)."""


@dataclass
class Attempt:
    """What one ``run_attempt`` call produced."""

    classification: Classification
    reason: str
    structured: dict[str, Any] | None
    exit_status: int | None
    signal: int | None
    session_id: str | None
    tail: str
    result_file: Path | None = None
    argv: list[str] = field(default_factory=list)
    limit: LimitNotice | None = None
    """A usage limit the CLI reported during the attempt, with its reset if it said one."""
    repairable: bool = False
    """The CLI ended its turn cleanly with no answer, or one the result schema refuses: a
    CLI that has no schema flag is asked once more, in the same session (``prompted.py``)."""
