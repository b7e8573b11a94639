"""The settings a run reads, in typed slices taken from the configuration at its claim.

A room of a run receives the slice it reads (``Heartbeats`` for the lease, ``Backoff``
for the endings, ``Budgets`` for the spending...) instead of the whole 71-key
``Config``: what a room depends on is in its signature, and a test builds one slice.

What a reload (SIGHUP, or the configuration file's change) changes under a running run
is explicit: only the keys of ``READ_LIVE``, which the run reads through the daemon's
shared parts at each use (the per-provider caps of ``Services.slots``, the storm
breaker of ``Services.breaker``). Every slice here is frozen at the claim, so a run in
flight finishes with the values it started with (docs/configuration.md, "What a reload
changes").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lane_runner import config
from lane_runner.config import Config
from lane_runner.names import PROVIDERS
from lane_runner.providers.egress import Destination

READ_LIVE: tuple[str, ...] = (
    *(f"max_running_{provider}" for provider in PROVIDERS),
    "breaker_threshold",
    "breaker_window",
    "breaker_probe_interval",
)
"""The keys whose reloaded values a running run meets: the caps it waits on for a
provider's slot and the breaker its failures feed are the daemon's, shared by every run."""


@dataclass(frozen=True)
class Worker:
    """Who runs a run's commands (the CLI, hooks, checks, git) and what they may pass
    and reach: ``egress`` None runs hooks as they are, else in a sandbox reaching those."""

    user: str | None
    env: tuple[str, ...]
    egress: tuple[Destination, ...] | None
    hooks: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of(cls, cfg: Config) -> Worker:
        egress = config.egress_destinations(cfg) if config.sandboxed(cfg) else None
        return cls(cfg.worker_user, tuple(cfg.worker_env), egress, cfg.hooks)


@dataclass(frozen=True)
class Heartbeats:
    """The lease: how long one renewal holds it, how often it is renewed, and how often
    a progress note goes to the board."""

    interval: float
    lease_ttl: float
    progress_note_interval: float

    @classmethod
    def of(cls, cfg: Config) -> Heartbeats:
        return cls(cfg.heartbeat_interval, cfg.lease_ttl, cfg.progress_note_interval)


@dataclass(frozen=True)
class SlotWait:
    """A route whose provider is at its cap: fall back to another provider once
    (``fallback``), else wait, beating the lease every ``beat`` seconds."""

    fallback: bool
    beat: float

    @classmethod
    def of(cls, cfg: Config) -> SlotWait:
        return cls(cfg.provider_full == "fallback", cfg.heartbeat_interval)


@dataclass(frozen=True)
class Backoff:
    """How a run that cannot go on waits: a cooldown (a usage limit, a provider away)
    and a counted failure's backoff."""

    cooldown_limit: int
    cooldown_base: float
    cooldown_max: float
    failure_limit: int
    failure_backoff_base: float
    failure_backoff_max: float

    @classmethod
    def of(cls, cfg: Config) -> Backoff:
        return cls(
            cfg.cooldown_limit, cfg.cooldown_base, cfg.cooldown_max,
            cfg.failure_limit, cfg.failure_backoff_base, cfg.failure_backoff_max,
        )


@dataclass(frozen=True)
class Budgets:
    """What a run may spend (the task's own limits come first) and the prices its usage
    is costed at."""

    max_cost_usd: float | None
    max_tokens: float | None
    daily_budget_usd: Mapping[str, float]
    prices: Mapping[str, Mapping[str, float]]

    @classmethod
    def of(cls, cfg: Config) -> Budgets:
        return cls(cfg.max_cost_usd, cfg.max_tokens, cfg.daily_budget_usd, cfg.prices)


@dataclass(frozen=True)
class Supervisor:
    """The limits a CLI runs under (``ProviderRequest``): when it is stalled, busy or
    given time to close, its log's rotation, who it runs as and where it may reach."""

    simulated: bool
    heartbeat_interval: float
    stall_timeout: float
    tool_stall_timeout: float
    busy_cpu: float  # a fraction of one core
    closing_grace: float
    rotate_bytes: int
    run_as: str | None
    isolated: bool
    egress_allow: tuple[Destination, ...]

    @classmethod
    def of(cls, cfg: Config) -> Supervisor:
        isolated = config.sandboxed(cfg)
        return cls(
            cfg.simulate, cfg.heartbeat_interval, cfg.stall_timeout, cfg.tool_stall_timeout,
            cfg.busy_cpu_percent / 100, cfg.closing_grace, cfg.log_rotate_bytes,
            cfg.worker_user, isolated,
            tuple(config.egress_destinations(cfg)) if isolated else (),
        )


@dataclass(frozen=True)
class FollowUps:
    """After a result is on the board: whether its branch is pushed and where, and the
    ``after_done`` hook run by ``worker``."""

    push: str
    push_remote: str
    worker: Worker

    @classmethod
    def of(cls, cfg: Config) -> FollowUps:
        return cls(cfg.push, cfg.push_remote, Worker.of(cfg))


@dataclass(frozen=True)
class RunSettings:
    """Every slice of one run, taken at its claim and kept to its end."""

    worker: Worker
    heartbeats: Heartbeats
    slot_wait: SlotWait
    backoff: Backoff
    budgets: Budgets
    supervisor: Supervisor
    follow_ups: FollowUps
    goal_margin: float
    commit_author: str
    min_free_disk_mb: int
    judge: str | None
    max_runtime: float

    @classmethod
    def of(cls, cfg: Config) -> RunSettings:
        return cls(
            Worker.of(cfg), Heartbeats.of(cfg), SlotWait.of(cfg), Backoff.of(cfg),
            Budgets.of(cfg), Supervisor.of(cfg), FollowUps.of(cfg),
            cfg.goal_margin, cfg.commit_author, cfg.min_free_disk_mb, cfg.judge,
            cfg.max_runtime,
        )
