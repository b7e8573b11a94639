"""The worker environment is an allow-list, never the runner's environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner.providers import worker_environment

RUNNER_ENV = {
    "PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
    "TERM": "xterm", "CODEX_HOME": "/c", "OPENAI_API_KEY": "sk-o", "CLAUDE_CONFIG_DIR": "/cl",
    "ANTHROPIC_API_KEY": "sk-a", "LANE_RUNNER_SIM_SCENARIO": "hang",
    "LANE_RUNNER_BOARD_URL": "postgresql://secret", "AWS_SECRET_ACCESS_KEY": "x",
    "DATABASE_URL": "postgres://y", "PYTHONPATH": "/evil",
}


def test_codex_gets_its_own_credentials_only() -> None:
    env = worker_environment("codex", source=RUNNER_ENV)
    assert env == {"PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                   "TZ": "UTC", "TERM": "xterm", "CODEX_HOME": "/c", "OPENAI_API_KEY": "sk-o",
                   "LANE_RUNNER_SIM_SCENARIO": "hang"}


def test_claude_gets_its_own_credentials_home_and_extras() -> None:
    env = worker_environment("claude", Path("/home/worker"), {"GIT_TERMINAL_PROMPT": "0"},
                             source=RUNNER_ENV)
    assert env["HOME"] == "/home/worker" and env["ANTHROPIC_API_KEY"] == "sk-a"
    assert env["CLAUDE_CONFIG_DIR"] == "/cl" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert not {"CODEX_HOME", "OPENAI_API_KEY", "LANE_RUNNER_BOARD_URL", "DATABASE_URL",
                "PYTHONPATH", "AWS_SECRET_ACCESS_KEY"} & set(env)


def test_unknown_provider_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        worker_environment("aider", source=RUNNER_ENV)


def test_path_always_present() -> None:
    assert worker_environment("codex", source={})["PATH"]


PROXIED = {
    **RUNNER_ENV, "HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "localhost",
    "SSL_CERT_FILE": "/etc/ca.pem", "SSH_AUTH_SOCK": "/run/agent", "SSH_SECRET": "z",
    "LANE_RUNNER_ROUTER_URL": "http://u:p@r", "APP_DATABASE_URL": "postgres://z",
    "PGPASSWORD": "pw",
}


def test_worker_env_adds_names_and_prefixes() -> None:
    env = worker_environment("codex", source=PROXIED,
                             passes=("HTTPS_PROXY", "NO_PROXY", "SSL_*", "SSH_AUTH_SOCK"))
    assert {"HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSH_AUTH_SOCK"} <= set(env)
    assert "SSH_SECRET" not in env and "ANTHROPIC_API_KEY" not in env


def test_a_prefix_never_reaches_the_runners_own_secrets() -> None:
    env = worker_environment("claude", source=PROXIED, passes=("L*", "APP_*", "PG*", "D*"))
    assert not {"LANE_RUNNER_BOARD_URL", "LANE_RUNNER_ROUTER_URL", "APP_DATABASE_URL",
                "PGPASSWORD", "DATABASE_URL"} & set(env)
    assert env["LANG"] == "C.UTF-8" and env["LANE_RUNNER_SIM_SCENARIO"] == "hang"
    named = worker_environment("claude", source=PROXIED, passes=("APP_DATABASE_URL",))
    assert named["APP_DATABASE_URL"] == "postgres://z"  # only when named exactly
