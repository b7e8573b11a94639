"""The key table: every configuration key declared once, with its parser (``checks``),
default and meaning; ``config show``, docs/configuration.md and ``settings.py`` are all
made from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lane_runner.config.checks import (
    _assignee,
    _boolean,
    _checks,
    _choice,
    _cli_config,
    _cli_env,
    _daily_budgets,
    _effort,
    _egress_allow,
    _hooks,
    _identity,
    _integer,
    _ip_address,
    _isolation,
    _listen,
    _models,
    _names,
    _number,
    _optional_number,
    _optional_text,
    _prices,
    _providers,
    _remote,
    _review,
    _route_id,
    _router_url,
    _user_names,
    _worker_env,
)
from lane_runner.config.people import _approval, _notify, _secret_file, shown_notify
from lane_runner.names import PROVIDERS
from lane_runner.providers import ADAPTERS, Provider


@dataclass(frozen=True)
class Key:
    """One configuration key: its name, the check that parses a value of it, the
    default and what it means (``config show`` and docs/configuration.md print it)."""

    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    shown: Callable[[Any], Any] | None = None
    """What ``config show`` and a refusal print of a value, where the value itself may
    hold a secret no redaction can find (an Apprise URL's token in its path)."""


def _cli_setting_keys(cli: Provider) -> tuple[Key, ...]:
    """``<provider>_config`` (for a CLI that takes its settings from the runner),
    ``<provider>_env`` and ``<provider>_sandbox`` (for a CLI with a sandbox of its own
    to choose), as the adapter describes them."""
    keys = [Key(f"{cli.name}_env", _cli_env, {}, cli.env_help)]
    if cli.takes_config:
        keys.insert(0, Key(f"{cli.name}_config", _cli_config(cli), {}, cli.config_help))
    if cli.sandbox_modes:
        modes = cli.sandbox_modes
        keys.append(Key(f"{cli.name}_sandbox", _choice(*modes), modes[0], cli.sandbox_help))
    return tuple(keys)


KEYS: tuple[Key, ...] = (
    Key(
        "board_url",
        _optional_text,
        None,
        "postgresql://... for a shared board, hermes:// for a Hermes home; empty: embedded SQLite",
    ),
    Key(
        "board_connections",
        _integer(1, 64),
        3,
        "with a postgresql:// board_url: connections this runner holds at most, one of them "
        "for LISTEN (1: none, wake-ups by a poll every second)",
    ),
    Key(
        "board_pooler",
        _choice("none", "transaction"),
        "none",
        "'transaction': board_url goes through a pooler in transaction mode (PgBouncer): no "
        "session state, no LISTEN on it",
    ),
    Key(
        "board_listen_url",
        _optional_text,
        None,
        "with board_pooler = 'transaction': the server's own address for LISTEN; empty: poll",
    ),
    Key(
        "hermes_boards",
        _names,
        (),
        "with a hermes:// board_url: the Hermes boards to serve; empty: all non-archived ones",
    ),
    Key(
        "concurrency",
        _integer(0, 64),
        0,
        "worker slots; 0: one per memory_per_run_mb of the memory this runner may use (1 to 16)",
    ),
    Key(
        "memory_per_run_mb",
        _integer(64, 1 << 30),
        2048,
        "memory one run is expected to take (MiB), for concurrency = 0",
    ),
    *(
        Key(f"max_running_{p}", _integer(0, 64), 0, f"runs {p} may hold at once; 0: no cap")
        for p in ADAPTERS
    ),
    Key(
        "provider_full",
        _choice("wait", "fallback"),
        "wait",
        "a task routed to a provider at its cap: wait for its slot, or fall back",
    ),
    Key(
        "min_available_memory_mb",
        _integer(0, 1 << 30),
        256,
        "claim nothing while less memory (MiB; the cgroup's room when lower) is free; 0: off",
    ),
    Key(
        "elevated_memory_mb",
        _integer(0, 1 << 30),
        1024,
        "start at most one new run per pass while less memory than this (MiB) is free; 0: off",
    ),
    Key(
        "min_free_disk_mb",
        _integer(0, 1 << 30),
        512,
        "claim nothing while the home's or a workspace's filesystem has less free (MiB); 0: off",
    ),
    Key("router_url", _router_url, None, "HTTP model router; empty: embedded static policy"),
    Key(
        "router_timeout",
        _number(0.1, 600),
        30.0,
        "seconds one routing or judging call may take, retries included",
    ),
    Key("router_auto_route", _route_id(), "lane/worker/auto", "route id asked for cli-auto"),
    Key(
        "router_manual_route",
        _route_id("provider", "effort"),
        "lane/worker/manual/{provider}/{effort}",
        "route id asked for a manual lane",
    ),
    Key("router_judge_route", _route_id(), "lane/judge", "route id asked for the router judge"),
    *(Key(f"{p}_bin", _optional_text, None, f"{p} CLI; empty: found on PATH") for p in ADAPTERS),
    *(key for cli in ADAPTERS.values() for key in _cli_setting_keys(cli)),
    Key("simulate", _boolean, False, "run the bundled simulated CLIs instead of real ones"),
    Key("worker_user", _optional_text, None, "unprivileged user the CLIs run as when root"),
    Key(
        "worker_users",
        _user_names,
        (),
        "a pool of unprivileged users, one per running slot, in place of worker_user: "
        "two tasks running at once never share a user (docs/security.md)",
    ),
    Key(
        "isolation",
        _isolation,
        None,
        "what contains each attempt: none, user (worker_user) or sandbox (bwrap: its own "
        "mounts, processes and network); empty: sandbox where this host allows it, else "
        "user with worker_user, else none (docs/security.md)",
    ),
    Key(
        "egress_allow",
        _egress_allow,
        (),
        "hosts (host or host:port) a sandboxed attempt may reach through the egress proxy, "
        "besides the CLIs' model APIs and the configured gateways",
    ),
    Key(
        "default_assignee",
        _assignee,
        "cli-auto",
        "given to unassigned ready tasks (empty: leave them)",
    ),
    Key("default_effort", _effort, "high", "effort for cli-auto under the static policy"),
    Key("provider_preference", _providers, PROVIDERS, "static policy: providers in order"),
    *(
        Key(
            f"{p}_models", _models, dict(cli.default_models), f"static policy: {p} model per effort"
        )
        for p, cli in ADAPTERS.items()
    ),
    Key("judge", _optional_text, None, "goal judge: empty for structural, 'router' for the router"),
    Key(
        "lease_ttl", _number(1, 30 * 86400), 1800.0, "claim lease in seconds, renewed by heartbeats"
    ),
    Key("heartbeat_interval", _number(0.05, 3600), 20.0, "seconds between heartbeats"),
    Key(
        "stall_timeout",
        _number(0.1, 86400),
        900.0,
        "no meaningful provider event this long: stalled",
    ),
    Key(
        "tool_stall_timeout",
        _number(0.1, 7 * 86400),
        3600.0,
        "the stall limit while a tool call (a command, a test suite) is in flight",
    ),
    Key(
        "busy_cpu_percent",
        _number(0, 6400),
        10.0,
        "an attempt whose processes use more CPU than this (% of one CPU) is alive however "
        "quiet; 0: only events count",
    ),
    Key(
        "closing_grace",
        _number(0, 600),
        5.0,
        "seconds a CLI may take to exit after its final answer; then its tree is ended",
    ),
    Key(
        "max_runtime",
        _number(1, 7 * 86400),
        43200.0,
        "seconds per run unless the task says otherwise",
    ),
    Key(
        "stuck_warning_fraction",
        _number(0, 0.99),
        0.5,
        "warn when a run is this far into stall_timeout or max_runtime; 0: off",
    ),
    Key(
        "shutdown_grace",
        _number(0, 3600),
        30.0,
        "SIGTERM or task stop: kill process trees after this",
    ),
    Key(
        "release_on_stop",
        _boolean,
        False,
        "SIGTERM hands running work back to ready (a pod that will not come back); "
        "false keeps it claimed for this runner's next start",
    ),
    Key("failure_limit", _integer(1, 1000), 3, "counted failures before a task is blocked gave_up"),
    Key(
        "failure_backoff_base",
        _number(0, 86400),
        30.0,
        "seconds before a task is claimed again after its first counted failure (doubles); 0: "
        "at once",
    ),
    Key(
        "failure_backoff_max",
        _number(0, 7 * 86400),
        1800.0,
        "longest wait after a counted failure, in seconds",
    ),
    Key(
        "breaker_threshold",
        _integer(0, 1000),
        3,
        "tasks failing the same way within breaker_window that mark their provider, "
        "workspace or board broken (claims stop for it); 0: off",
    ),
    Key(
        "breaker_window",
        _number(1, 7 * 86400),
        900.0,
        "seconds within which breaker_threshold same failures trip the breaker",
    ),
    Key(
        "breaker_probe_interval",
        _number(1, 7 * 86400),
        600.0,
        "seconds between probes of a broken provider, workspace or board: one run is let "
        "through, and its success clears the breaker",
    ),
    Key("cooldown_base", _number(0, 86400), 60.0, "first capacity cooldown in seconds (doubles)"),
    Key("cooldown_max", _number(0, 7 * 86400), 3600.0, "longest capacity cooldown in seconds"),
    Key(
        "cooldown_limit",
        _integer(1, 100_000),
        24,
        "consecutive cooldowns (capacity, stalls) before a task is blocked",
    ),
    Key(
        "goal_margin",
        _number(0, 86400),
        300.0,
        "goal mode: no new turn with less runtime than this left (seconds)",
    ),
    Key(
        "progress_note_interval",
        _number(0, 7 * 86400),
        1800.0,
        "a comment that a long attempt is still working, this often (seconds); 0: never",
    ),
    Key(
        "worker_env",
        _worker_env,
        (),
        "more variables workers inherit: names, or prefixes ending in '*'",
    ),
    Key("gc_interval", _number(1, 86400), 300.0, "seconds between journal artifact collections"),
    Key("retention_days", _number(0.01, 3650), 30.0, "journal artifacts older than this go"),
    Key("retention_count", _integer(16, 10_000_000), 1024, "journal artifacts kept per board"),
    Key("retention_bytes", _integer(1 << 20, 1 << 42), 128 << 20, "journal bytes kept per board"),
    Key("log_rotate_bytes", _integer(4096, 1 << 40), 64 << 20, "rotate a task log past this size"),
    Key(
        "commit_author",
        _identity,
        "lane-runner <lane-runner@localhost>",
        "author and committer of the commit that holds a task's result: 'Name <email>'",
    ),
    Key(
        "push",
        _choice("never", "on_done"),
        "never",
        "push a done task's branch to push_remote: never, or on_done (never forced)",
    ),
    Key("push_remote", _remote, "origin", "the git remote branches are pushed to"),
    Key(
        "hooks",
        _hooks,
        {},
        "per board ('*': every other): after_create, before_run, after_run, after_done, "
        "before_remove commands and a timeout",
    ),
    Key(
        "checks",
        _checks,
        {},
        "acceptance checks: shell commands run in the task's worktree after each completed "
        "answer, a list for every board or per board ('*': every other); docs/verification.md",
    ),
    Key("check_turns", _integer(0, 20), 3, "failed-check turns fed back before blocked 'checks'"),
    Key("check_timeout", _number(1, 86400), 600.0, "seconds one acceptance check may run"),
    Key(
        "review",
        _review,
        {},
        "who reviews a result whose checks passed: off, auto (another provider than the "
        "implementer's) or a provider; for every board or per board ('*': every other)",
    ),
    Key("review_rounds", _integer(0, 10), 2, "review rounds fed back before blocked 'review'"),
    Key(
        "notify",
        _notify,
        {},
        "per board ('*': every other): Apprise urls, the events to send (done, blocked, "
        "gave_up, review_requested, changes_requested, approval_needed, budget_spent, "
        "breaker_tripped, not_claiming; default all) and not_claiming_minutes",
        shown_notify,
    ),
    Key(
        "notify_attempts",
        _integer(1, 100),
        8,
        "sends of one notification tried (with a doubling backoff) before it is dropped",
    ),
    Key(
        "approval",
        _approval,
        {},
        "none, before_run or before_push for every board, or per board ('*': every other): "
        "which runs and pushes wait for 'task approve'; a task's own setting wins",
    ),
    Key(
        "approval_totp_file",
        _secret_file,
        None,
        "a file holding a base32 TOTP secret: 'task approve' then needs --code; empty: none",
    ),
    Key(
        "delete_branches",
        _boolean,
        False,
        "cleanup also deletes a finished task's branch once it is merged or pushed",
    ),
    Key(
        "prices",
        _prices,
        {},
        "dollars per million tokens per model and kind (input, cached_input, cache_write, "
        "output), for CLIs that report no cost (codex); unpriced spend is 'unknown'",
    ),
    Key(
        "max_cost_usd",
        _optional_number(0, 1e9),
        None,
        "a task's dollar budget unless it has its own (task add --max-cost-usd); empty: none",
    ),
    Key(
        "max_tokens",
        _optional_number(0, 1e15),
        None,
        "a task's token budget unless it has its own (task add --max-tokens); empty: none",
    ),
    Key(
        "daily_budget_usd",
        _daily_budgets,
        {},
        "dollars a board may spend per UTC day, per board ('*': every other); spent: "
        "nothing more is claimed there that day",
    ),
    Key(
        "usage_retention_days",
        _number(0, 36500),
        90.0,
        "the home's usage records older than this go once the board's shared ledger holds "
        "them (never otherwise); 0: keep every record",
    ),
    Key(
        "metrics_port",
        _integer(0, 65535),
        0,
        "Prometheus metrics, /healthz and /readyz on <metrics_address>:<port>; 0: off",
    ),
    Key(
        "metrics_address",
        _ip_address,
        "127.0.0.1",
        "address the metrics port binds: loopback, or 0.0.0.0 / :: in a pod",
    ),
    Key(
        "web_listen",
        _listen,
        None,
        "the web console in the daemon on HOST:PORT (127.0.0.1:8480); empty: off "
        "(docs/console.md)",
    ),
    Key(
        "web_token_file",
        _optional_text,
        None,
        "file holding the web console's token (else LANE_RUNNER_WEB_TOKEN); controls need it",
    ),
    Key(
        "health_timeout",
        _number(1, 86400),
        120.0,
        "/healthz fails once the loop has not completed a healthy turn for this long (seconds)",
    ),
)
KEYS_BY_NAME = {key.name: key for key in KEYS}
#: Keys a running daemon reads once, at start: the board store and its failure limit,
#: the worker user its home was opened for, the metrics listener. A reload (SIGHUP)
#: keeps their running values and says so; every other key takes effect at once.
RESTART_KEYS = (
    "board_url",
    "board_connections",
    "board_pooler",
    "board_listen_url",
    "hermes_boards",
    "failure_limit",
    "worker_user",
    "worker_users",
    "metrics_port",
    "metrics_address",
    "web_listen",
    "web_token_file",
)
