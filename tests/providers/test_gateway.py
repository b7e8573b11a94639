"""Your own model gateway: codex_config, codex_env and claude_env, from config.toml to the
CLI's argv and environment, and what the adapters say is missing (pure, no processes).

The real CLIs following these settings to a gateway: tests/realrun."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.errors import UsageError
from lane_runner.providers import claude, codex

from .conftest import RequestFactory, codex_argv

CODEX = codex.ADAPTER
CLAUDE = claude.ADAPTER

GATEWAY_TOML = """
[codex_config]
model_provider = "corp"
analytics.enabled = false
model_providers.corp = { name = "Corp", base_url = "https://llm.corp.example/v1", \
wire_api = "responses", env_key = "CORP_LLM_KEY", http_headers = { X-Team = "lanes" } }

[codex_env]
CORP_LLM_KEY = "sk-corp-secret"

[claude_env]
ANTHROPIC_BASE_URL = "https://llm.corp.example/anthropic"
ANTHROPIC_AUTH_TOKEN = "corp-bearer-secret"
"""


def load(tmp_path: Path, text: str = GATEWAY_TOML, **environ: str) -> config.Config:
    (tmp_path / "config.toml").write_text(text)
    return config.load(tmp_path, environ)


def test_codex_config_is_flattened_to_one_override_per_setting(tmp_path: Path) -> None:
    cfg = load(tmp_path)
    assert cfg.codex_config == {
        "model_provider": "corp",
        "analytics.enabled": False,
        "model_providers.corp.name": "Corp",
        "model_providers.corp.base_url": "https://llm.corp.example/v1",
        "model_providers.corp.wire_api": "responses",
        "model_providers.corp.env_key": "CORP_LLM_KEY",
        "model_providers.corp.http_headers.X-Team": "lanes",
    }
    assert config.cli_overrides(cfg, "codex") == cfg.codex_config
    assert config.cli_overrides(cfg, "claude") == {}
    assert config.cli_environment(cfg, "codex") == {"CORP_LLM_KEY": "sk-corp-secret"}
    assert config.cli_environment(cfg, "claude")["ANTHROPIC_BASE_URL"].endswith("/anthropic")


def test_the_same_settings_come_from_the_environment_as_toml(tmp_path: Path) -> None:
    cfg = load(tmp_path, "", LANE_RUNNER_CODEX_CONFIG='model_provider = "corp"\n'
               'model_providers.corp.base_url = "http://gw:4000/v1"',
               LANE_RUNNER_CLAUDE_ENV='ANTHROPIC_BASE_URL = "http://gw:4000"')
    assert cfg.codex_config == {"model_provider": "corp",
                                "model_providers.corp.base_url": "http://gw:4000/v1"}
    assert cfg.claude_env == {"ANTHROPIC_BASE_URL": "http://gw:4000"}
    assert cfg.sources["codex_config"] == "LANE_RUNNER_CODEX_CONFIG"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[codex_config]\nmodel = "gpt-x"\n', "'model' is chosen by the router"),
        ('[codex_config]\nmodel_reasoning_effort = "low"\n', "chosen by the router"),
        ('[codex_config]\nmodel_providers.x.experimental_bearer_token = "t"\n',
         "credential on codex's command line"),
        ('[codex_config]\nmodel_providers.x.http_headers.Authorization = "Bearer t"\n',
         "name a variable instead"),
        ('[codex_config]\nmodel_providers.x.base_url = "https://u:pw@gw.example/v1"\n',
         "credential on codex's command line"),
        ('[codex_config]\n"a b" = 1\n', "key parts are letters"),
        ("[codex_config]\nwhen = 1979-05-27\n", "no TOML spelling"),
        ("[claude_env]\nANTHROPIC_BASE_URL = 1\n", "expected a string"),
        ('[claude_env]\nLANE_RUNNER_ROUTER_URL = "x"\n', "never reach workers"),
        ('[codex_env]\n"NOT A NAME" = "x"\n', "not a variable name"),
    ],
)
def test_settings_codex_or_a_worker_must_not_get_are_refused_naming_them(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        load(tmp_path, text)


def test_bad_toml_in_the_environment_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="bad value for claude_env in LANE_RUNNER_CLAUDE_ENV"):
        load(tmp_path, "", LANE_RUNNER_CLAUDE_ENV="ANTHROPIC_BASE_URL=http://gw")


def test_codex_gets_each_setting_as_c_before_the_runners_own_flags(
    make_request: RequestFactory, tmp_path: Path
) -> None:
    req = make_request("codex", config_overrides=load(tmp_path).codex_config)
    argv = codex_argv(req, None)
    flags = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    assert flags == [
        'model_provider="corp"',
        "analytics.enabled=false",
        'model_providers.corp.name="Corp"',
        'model_providers.corp.base_url="https://llm.corp.example/v1"',
        'model_providers.corp.wire_api="responses"',
        'model_providers.corp.env_key="CORP_LLM_KEY"',
        'model_providers.corp.http_headers.X-Team="lanes"',
        'model_reasoning_effort="high"',
    ]
    resumed = codex_argv(req, "0199a213-81c0-7800-8aa1-bbab2a035a53")
    assert resumed.count("-c") == argv.count("-c"), "a resumed thread keeps the gateway"


def test_toml_literals_are_what_codex_parses() -> None:
    assert codex.toml_literal('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert codex.toml_literal([1, 2.5, True, "é"]) == '[1, 2.5, true, "é"]'
    assert codex.toml_literal({"X-Org": "a"}) == '{"X-Org" = "a"}'
    with pytest.raises(ValueError, match="no TOML spelling"):
        codex.toml_literal(float("nan"))


def test_codex_gateway_says_what_would_stop_codex(tmp_path: Path) -> None:
    settings = load(tmp_path).codex_config
    assert CODEX.gateway(settings, {"CORP_LLM_KEY": "k"}) == ("https://llm.corp.example/v1", [])
    base, problems = CODEX.gateway(settings, {})
    assert base == "https://llm.corp.example/v1"
    assert problems == ["CORP_LLM_KEY (named by model_providers.corp) does not reach the worker: "
                        "set it in codex_env, or export it and add it to worker_env"]
    assert CODEX.gateway({}, {}) == (None, [])
    _, undefined = CODEX.gateway({"model_provider": "elsewhere"}, {"CODEX_HOME": str(tmp_path)})
    assert "Model provider `elsewhere` not found" in undefined[0]
    (tmp_path / "config.toml").write_text('[model_providers.elsewhere]\nbase_url = "http://h"\n')
    assert CODEX.gateway({"model_provider": "elsewhere"}, {"CODEX_HOME": str(tmp_path)}) == (
        None, []), "the worker's own codex configuration may define it"
    _, chat = CODEX.gateway({"model_provider": "x", "model_providers.x.base_url": "ftp://h",
                             "model_providers.x.wire_api": "chat"}, {})
    assert [p.split(":")[0] for p in chat] == ["model_providers.x.base_url must be an http",
                                               "model_providers.x.wire_api"]


def test_claude_gateway_says_what_would_stop_claude() -> None:
    base = "https://gw.example/anthropic"
    assert CLAUDE.gateway({}, {}) == (None, [])
    assert CLAUDE.gateway({}, {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "k"}) == (
        base, [])
    assert CLAUDE.gateway({}, {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_AUTH_TOKEN": "t"}) == (
        base, [])
    _, keyless = CLAUDE.gateway({}, {"ANTHROPIC_BASE_URL": base})
    assert "would answer 'Not logged in'" in keyless[0]
    _, bad = CLAUDE.gateway({}, {"ANTHROPIC_BASE_URL": "gw:4000", "ANTHROPIC_API_KEY": "k"})
    assert bad == ["ANTHROPIC_BASE_URL must be an http:// or https:// URL with a host"]
    assert CLAUDE.gateway({}, {"CLAUDE_CODE_USE_BEDROCK": "1"})[1] == [
        "CLAUDE_CODE_USE_BEDROCK needs AWS_REGION in the worker's environment"]
    assert CLAUDE.gateway({}, {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1"}) == (
        None, [])
    assert len(CLAUDE.gateway({}, {"CLAUDE_CODE_USE_VERTEX": "true"})[1]) == 2
