"""The configuration's typed fields, one per key of ``config.KEYS``. Generated: do
not edit. After changing a key or adding a provider adapter, regenerate it with
``python -c 'from lane_runner import config; config.write_settings()'``;
``tests/test_settings.py`` fails while it is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every key's effective value; ``config.KEYS`` says what each means."""

    board_url: str | None
    board_connections: int
    board_pooler: str
    board_listen_url: str | None
    hermes_boards: tuple[str, ...]
    concurrency: int
    memory_per_run_mb: int
    max_running_codex: int
    max_running_claude: int
    max_running_opencode: int
    max_running_gemini: int
    provider_full: str
    min_available_memory_mb: int
    elevated_memory_mb: int
    min_free_disk_mb: int
    router_url: str | None
    router_timeout: float
    router_auto_route: str
    router_manual_route: str
    router_judge_route: str
    codex_bin: str | None
    claude_bin: str | None
    opencode_bin: str | None
    gemini_bin: str | None
    codex_config: dict[str, Any]
    codex_env: dict[str, str]
    codex_sandbox: str
    claude_env: dict[str, str]
    opencode_env: dict[str, str]
    gemini_env: dict[str, str]
    simulate: bool
    worker_user: str | None
    worker_users: tuple[str, ...]
    isolation: str | None
    egress_allow: tuple[str, ...]
    default_assignee: str
    default_effort: str
    provider_preference: tuple[str, ...]
    codex_models: dict[str, str]
    claude_models: dict[str, str]
    opencode_models: dict[str, str]
    gemini_models: dict[str, str]
    judge: str | None
    lease_ttl: float
    heartbeat_interval: float
    stall_timeout: float
    tool_stall_timeout: float
    busy_cpu_percent: float
    closing_grace: float
    max_runtime: float
    stuck_warning_fraction: float
    shutdown_grace: float
    release_on_stop: bool
    failure_limit: int
    failure_backoff_base: float
    failure_backoff_max: float
    breaker_threshold: int
    breaker_window: float
    breaker_probe_interval: float
    cooldown_base: float
    cooldown_max: float
    cooldown_limit: int
    goal_margin: float
    progress_note_interval: float
    worker_env: tuple[str, ...]
    gc_interval: float
    retention_days: float
    retention_count: int
    retention_bytes: int
    log_rotate_bytes: int
    commit_author: str
    push: str
    push_remote: str
    hooks: dict[str, dict[str, Any]]
    checks: dict[str, list[str]]
    check_turns: int
    check_timeout: float
    review: dict[str, str]
    review_rounds: int
    notify: dict[str, dict[str, Any]]
    notify_attempts: int
    approval: dict[str, str]
    approval_totp_file: str | None
    delete_branches: bool
    prices: dict[str, dict[str, float]]
    max_cost_usd: float | None
    max_tokens: float | None
    daily_budget_usd: dict[str, float]
    usage_retention_days: float
    metrics_port: int
    metrics_address: str
    web_listen: str | None
    web_token_file: str | None
    health_timeout: float


class Changes(TypedDict, total=False):
    """``Config.replace``'s keyword arguments: a key's new value, parsed as from the
    file."""

    board_url: Any
    board_connections: Any
    board_pooler: Any
    board_listen_url: Any
    hermes_boards: Any
    concurrency: Any
    memory_per_run_mb: Any
    max_running_codex: Any
    max_running_claude: Any
    max_running_opencode: Any
    max_running_gemini: Any
    provider_full: Any
    min_available_memory_mb: Any
    elevated_memory_mb: Any
    min_free_disk_mb: Any
    router_url: Any
    router_timeout: Any
    router_auto_route: Any
    router_manual_route: Any
    router_judge_route: Any
    codex_bin: Any
    claude_bin: Any
    opencode_bin: Any
    gemini_bin: Any
    codex_config: Any
    codex_env: Any
    codex_sandbox: Any
    claude_env: Any
    opencode_env: Any
    gemini_env: Any
    simulate: Any
    worker_user: Any
    worker_users: Any
    isolation: Any
    egress_allow: Any
    default_assignee: Any
    default_effort: Any
    provider_preference: Any
    codex_models: Any
    claude_models: Any
    opencode_models: Any
    gemini_models: Any
    judge: Any
    lease_ttl: Any
    heartbeat_interval: Any
    stall_timeout: Any
    tool_stall_timeout: Any
    busy_cpu_percent: Any
    closing_grace: Any
    max_runtime: Any
    stuck_warning_fraction: Any
    shutdown_grace: Any
    release_on_stop: Any
    failure_limit: Any
    failure_backoff_base: Any
    failure_backoff_max: Any
    breaker_threshold: Any
    breaker_window: Any
    breaker_probe_interval: Any
    cooldown_base: Any
    cooldown_max: Any
    cooldown_limit: Any
    goal_margin: Any
    progress_note_interval: Any
    worker_env: Any
    gc_interval: Any
    retention_days: Any
    retention_count: Any
    retention_bytes: Any
    log_rotate_bytes: Any
    commit_author: Any
    push: Any
    push_remote: Any
    hooks: Any
    checks: Any
    check_turns: Any
    check_timeout: Any
    review: Any
    review_rounds: Any
    notify: Any
    notify_attempts: Any
    approval: Any
    approval_totp_file: Any
    delete_branches: Any
    prices: Any
    max_cost_usd: Any
    max_tokens: Any
    daily_budget_usd: Any
    usage_retention_days: Any
    metrics_port: Any
    metrics_address: Any
    web_listen: Any
    web_token_file: Any
    health_timeout: Any
