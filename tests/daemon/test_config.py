"""Configuration: defaults, config.toml, LANE_RUNNER_<KEY>, and errors that name the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from lane_runner import config
from lane_runner.errors import UsageError
from lane_runner.providers import sandbox
from lane_runner.providers.egress import Destination


def test_precedence_is_default_then_file_then_environment(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'concurrency = 2\nlease_ttl = 60\nprovider_preference = ["claude"]\n'
    )
    cfg = config.load(tmp_path, {"LANE_RUNNER_CONCURRENCY": "8"})
    assert (cfg.concurrency, cfg.sources["concurrency"]) == (8, "LANE_RUNNER_CONCURRENCY")
    assert (cfg.lease_ttl, cfg.sources["lease_ttl"]) == (60.0, str(tmp_path / "config.toml"))
    assert cfg.provider_preference == ("claude",)
    assert (cfg.max_runtime, cfg.sources["max_runtime"]) == (43200.0, "default")


@pytest.mark.parametrize(
    ("text", "environ", "message"),
    [
        ("colour = 1\n", {}, "unknown key 'colour'"),
        ("", {"LANE_RUNNER_COLOUR": "1"}, "unknown setting LANE_RUNNER_COLOUR"),
        ("concurrency = -1\n", {}, "bad value for concurrency"),
        ("", {"LANE_RUNNER_SIMULATE": "perhaps"}, "bad value for simulate"),
        ("", {"LANE_RUNNER_DEFAULT_ASSIGNEE": "bob"}, "bad value for default_assignee"),
        ("", {"LANE_RUNNER_CODEX_MODELS": "huge=gpt-x"}, "bad value for codex_models"),
        ("concurrency = [\n", {}, "not valid TOML"),
        ("", {"LANE_RUNNER_PUSH": "always"}, "bad value for push"),
        ("", {"LANE_RUNNER_PUSH_REMOTE": "--upload-pack=x"}, "bad value for push_remote"),
        ("", {"LANE_RUNNER_PUSH_REMOTE": "../elsewhere"}, "bad value for push_remote"),
        ("", {"LANE_RUNNER_COMMIT_AUTHOR": "nobody"}, "bad value for commit_author"),
        ('commit_author = "a <b@c> <d@e>"\n', {}, "bad value for commit_author"),
    ],
)
def test_bad_configuration_names_the_key(
    tmp_path: Path, text: str, environ: dict[str, str], message: str
) -> None:
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(UsageError, match=message):
        config.load(tmp_path, environ)


def test_models_from_the_environment(tmp_path: Path) -> None:
    cfg = config.load(tmp_path, {"LANE_RUNNER_CLAUDE_MODELS": "low=claude-a, high=claude-b"})
    assert cfg.claude_models == {"low": "claude-a", "high": "claude-b"}


def test_home_defaults(tmp_path: Path) -> None:
    assert config.default_home({"LANE_RUNNER_HOME": "/x"}) == Path("/x")
    assert config.default_home({"STATE_DIRECTORY": "/var/lib/lane-runner"}) == Path(
        "/var/lib/lane-runner"
    )
    assert config.default_home({"XDG_DATA_HOME": "/d"}) == Path("/d/lane-runner")


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


def test_config_show_in_a_subprocess(tmp_path: Path) -> None:
    result = run_cli(
        "--home", str(tmp_path), "config", "show", "--json", env={"LANE_RUNNER_CONCURRENCY": "3"}
    )
    assert result.returncode == 0, result.stderr
    document = orjson.loads(result.stdout)
    assert document["keys"]["concurrency"] == {"value": 3, "source": "LANE_RUNNER_CONCURRENCY"}
    human = run_cli("--home", str(tmp_path), "config", "show")
    assert human.returncode == 0 and "concurrency" in human.stdout and "default" in human.stdout


def test_config_show_with_a_bad_value_exits_2_naming_it(tmp_path: Path) -> None:
    result = run_cli(
        "--home", str(tmp_path), "config", "show", env={"LANE_RUNNER_LEASE_TTL": "soon"}
    )
    assert result.returncode == 2 and "lease_ttl" in result.stderr and result.stdout == ""


def test_a_worker_user_that_does_not_exist_stops_the_daemon_at_start(tmp_path: Path) -> None:
    result = run_cli(
        "--home", str(tmp_path), "recover", env={"LANE_RUNNER_WORKER_USER": "no-such-user-x"}
    )
    assert (
        result.returncode == 2 and "no-such-user-x" in result.stderr and "useradd" in result.stderr
    )


def test_worker_env_is_a_list_of_names_or_prefixes(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('worker_env = ["HTTPS_PROXY", "SSL_*"]\n')
    assert config.load(tmp_path, {}).worker_env == ("HTTPS_PROXY", "SSL_*")
    from_env = config.load(tmp_path, {"LANE_RUNNER_WORKER_ENV": "NO_PROXY, SSH_AUTH_SOCK"})
    assert from_env.worker_env == ("NO_PROXY", "SSH_AUTH_SOCK")


@pytest.mark.parametrize(
    ("value", "message"),
    [("*", "not a variable name"), ("HTTP PROXY", "not a variable name"),
     ("A*B", "not a variable name"), ("LANE_RUNNER_*", "never reach workers"),
     ("lane_runner_board_url", "never reach workers")],
)
def test_worker_env_refuses_patterns_that_could_leak(
    tmp_path: Path, value: str, message: str
) -> None:
    with pytest.raises(UsageError, match=f"bad value for worker_env.*{message}"):
        config.load(tmp_path, {"LANE_RUNNER_WORKER_ENV": value})


def test_config_show_lists_what_reaches_the_workers(tmp_path: Path) -> None:
    env = {"LANE_RUNNER_WORKER_ENV": "HTTPS_PROXY,APP_*", "HTTPS_PROXY": "http://p:3128",
           "APP_DATABASE_URL": "postgres://s", "APP_MODE": "x", "OPENAI_API_KEY": "sk"}
    result = run_cli("--home", str(tmp_path), "config", "show", "--json", env=env)
    assert result.returncode == 0, result.stderr
    passes = orjson.loads(result.stdout)["worker_environment"]
    assert "HTTPS_PROXY" in passes["codex"] and "APP_MODE" in passes["claude"]
    assert "APP_DATABASE_URL" not in passes["codex"] and "OPENAI_API_KEY" not in passes["claude"]
    assert "LANE_RUNNER_WORKER_ENV" not in passes["codex"]
    human = run_cli("--home", str(tmp_path), "config", "show", env=env).stdout
    assert "codex: " in human and "HTTPS_PROXY" in human.split("worker environment")[1]
    assert "postgres://s" not in human


# -- the configuration file is the operator's: links as Kubernetes mounts them ------


def configmap(directory: Path, text: str, version: str = "..2024_01_01_00_00_00.1") -> Path:
    """``directory`` laid out as the kubelet mounts a ConfigMap: each key a link through
    ``..data``, itself a link to a timestamped directory swapped on every update."""
    data = directory / version
    data.mkdir(parents=True)
    (data / "config.toml").write_text(text)
    (data / "config.toml").chmod(0o644)
    staged = directory / "..data_tmp"
    staged.symlink_to(version)
    staged.rename(directory / "..data")  # the kubelet's atomic swap
    key = directory / "config.toml"
    if not key.is_symlink():
        key.symlink_to("..data/config.toml")
    return key


def test_a_configmap_style_linked_config_toml_in_the_home_is_read(tmp_path: Path) -> None:
    key = configmap(tmp_path / "mounted", "concurrency = 7\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").symlink_to(key)
    cfg = config.load(home, {})
    assert (cfg.concurrency, cfg.sources["concurrency"]) == (7, str(home / "config.toml"))
    assert (home / "config.toml").is_symlink() and not list(home.glob("config.toml.aside-*"))


def test_lane_runner_config_names_a_mounted_configmap_and_reads_its_updates(
    tmp_path: Path,
) -> None:
    mounted = tmp_path / "etc"
    key = configmap(mounted, "concurrency = 7\n")
    environ = {config.CONFIG_VARIABLE: str(key)}
    assert config.load(tmp_path / "home", environ).concurrency == 7
    configmap(mounted, "concurrency = 9\n", version="..2024_01_01_00_05_00.2")  # an update
    assert config.load(tmp_path / "home", environ).concurrency == 9


@pytest.mark.parametrize(("mode", "who"), [(0o666, "every user"), (0o664, "group")])
def test_a_link_to_a_file_others_may_write_is_refused_and_left_alone(
    tmp_path: Path, mode: int, who: str
) -> None:
    key = configmap(tmp_path / "mounted", "concurrency = 7\n")
    key.resolve().chmod(mode)
    (tmp_path / "config.toml").symlink_to(key)
    with pytest.raises(UsageError, match=f"can be written by {who}.*chmod go-w"):
        config.load(tmp_path, {})
    assert (tmp_path / "config.toml").is_symlink() and key.resolve().read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_link_to_a_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    key = configmap(tmp_path / "mounted", "concurrency = 7\n")
    os.chown(key.resolve(), 65534, -1)  # a worker user's file, even 0644, is its to rewrite
    (tmp_path / "config.toml").symlink_to(key)
    with pytest.raises(UsageError, match="can be written by its owner, uid 65534"):
        config.load(tmp_path, {})


def test_a_dangling_link_or_a_missing_named_file_is_an_error_not_the_defaults(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.toml").symlink_to(tmp_path / "unmounted" / "config.toml")
    with pytest.raises(UsageError, match=r"a link to .*unmounted/config.toml\) does not exist"):
        config.load(tmp_path, {})
    named = {config.CONFIG_VARIABLE: str(tmp_path / "nowhere.toml")}
    with pytest.raises(UsageError, match="nowhere.toml does not exist"):
        config.load(tmp_path / "home", named)


def test_a_link_to_a_fifo_is_refused_without_waiting_on_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "config.toml").symlink_to(tmp_path / "pipe")
    with pytest.raises(UsageError, match="is a fifo, not a regular file"):
        config.load(tmp_path, {})


def test_config_show_runs_on_a_linked_config(tmp_path: Path) -> None:
    key = configmap(tmp_path / "mounted", "concurrency = 5\n")
    result = run_cli(
        "--home", str(tmp_path / "home"), "config", "show", "--json",
        env={config.CONFIG_VARIABLE: str(key)},
    )
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["keys"]["concurrency"] == {"value": 5, "source": str(key)}


def test_isolation_and_the_egress_allow_list(tmp_path: Path) -> None:
    """Catches: a bad isolation level or allow-list entry taken (every attempt would then
    fail at its start), and the configured gateway missing from what a sandbox reaches
    (a sandboxed CLI could not reach its model)."""
    text = ('isolation = "sandbox"\negress_allow = ["registry.npmjs.org", "10.0.0.5:8080"]\n'
            'claude_env = { ANTHROPIC_BASE_URL = "http://gw.internal:4000" }\n')
    (tmp_path / "config.toml").write_text(text)
    cfg = config.load(tmp_path, {})
    assert cfg.isolation == "sandbox"
    reached = config.egress_destinations(cfg, {})
    assert Destination("registry.npmjs.org") in reached
    assert Destination("10.0.0.5", 8080) in reached
    assert Destination("gw.internal", 4000) in reached
    assert Destination("api.openai.com") in reached and Destination("api.anthropic.com") in reached
    for key, value in (("ISOLATION", "container"), ("EGRESS_ALLOW", "host:99999")):
        with pytest.raises(UsageError, match=f"bad value for {key.lower()}"):
            config.load(tmp_path, {f"LANE_RUNNER_{key}": value})


@pytest.mark.parametrize(
    ("configured", "worker_user", "unavailable", "level"),
    [(None, None, None, "sandbox"), (None, "w", "no bwrap", "user"),
     (None, None, "no bwrap", "none"), ("user", None, None, "user"),
     ("sandbox", "w", "no bwrap", "sandbox")],
)
def test_the_isolation_that_applies(
    configured: str | None, worker_user: str | None, unavailable: str | None, level: str
) -> None:
    """Catches: the default not falling back where bwrap is missing (every attempt
    refused), or an explicit ``sandbox`` quietly lowered to ``user``."""
    chosen, why = sandbox.choose(configured, worker_user, unavailable)
    assert chosen == level
    if unavailable is not None and configured != "user":
        assert unavailable in why
