"""Your own model gateway, as an operator sees it: ``config show``, the dry run and ``doctor``
(the real CLIs following the same settings to a gateway: tests/realrun)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.harness import Lane

SECRETS = ("corp-bearer-secret", "sk-corp-secret")


@pytest.fixture
def gateway() -> Iterator[int]:
    """A port on loopback that accepts connections, standing in for the gateway."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def doctor(lane: Lane) -> dict[str, Any]:
    done = lane.cli("doctor", "--json")
    assert done.stdout, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def point_at(lane: Lane, port: int, key: str | None = "sk-corp-secret") -> None:
    lane.write_config(
        codex_config={"model_provider": "corp", "model_providers": {"corp": {
            "name": "Corp", "base_url": f"http://127.0.0.1:{port}/v1",
            "env_key": "CORP_LLM_KEY"}}},
        codex_env={"CORP_LLM_KEY": key} if key else {},
        claude_env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
                    "ANTHROPIC_AUTH_TOKEN": "corp-bearer-secret"},
    )


def test_config_show_prints_the_gateway_and_hides_its_credentials(lane: Lane, gateway: int) -> None:
    point_at(lane, gateway)
    shown = lane.cli("config", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    keys = orjson.loads(shown.stdout)["keys"]
    assert keys["codex_config"]["value"]["model_providers.corp.base_url"] == (
        f"http://127.0.0.1:{gateway}/v1")
    assert keys["claude_env"]["value"] == {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{gateway}",
                                           "ANTHROPIC_AUTH_TOKEN": "***"}
    assert keys["codex_env"]["value"] == {"CORP_LLM_KEY": "***"}
    assert keys["codex_config"]["value"]["model_providers.corp.env_key"] == "CORP_LLM_KEY", (
        "env_key names the variable, it holds no secret")
    reaching = orjson.loads(shown.stdout)["worker_environment"]
    assert "CORP_LLM_KEY" in reaching["codex"] and "ANTHROPIC_AUTH_TOKEN" in reaching["claude"]
    human = lane.cli("config", "show").stdout
    assert "model_providers.corp.base_url" in human
    assert not any(secret in shown.stdout + human for secret in SECRETS)


def test_the_dry_run_shows_the_gateway_flags_and_environment(lane: Lane, gateway: int) -> None:
    point_at(lane, gateway)
    codex_task = lane.add("to the gateway", assignee="cli-codex-low")
    claude_task = lane.add("to the other gateway", assignee="cli-claude-low")
    planned = lane.cli("run", "--dry-run", "--json")
    assert planned.returncode == 0, planned.stderr
    found = {item["task_id"]: item for item in json.loads(planned.stdout)}
    argv = found[codex_task.id]["argv"]
    assert argv[argv.index("-c") + 1] == 'model_provider="corp"'
    assert f'model_providers.corp.base_url="http://127.0.0.1:{gateway}/v1"' in argv
    assert found[codex_task.id]["environment"] == {"CORP_LLM_KEY": "***"}
    assert found[claude_task.id]["environment"]["ANTHROPIC_AUTH_TOKEN"] == "***"
    human = lane.cli("run", "--dry-run").stdout
    assert f"ANTHROPIC_BASE_URL=http://127.0.0.1:{gateway}" in human
    assert not any(secret in planned.stdout + human for secret in SECRETS)


def test_doctor_checks_each_gateway(lane: Lane, gateway: int) -> None:
    point_at(lane, gateway)
    checks = {(c["name"], c["level"]) for c in doctor(lane)["checks"]}
    assert {("codex gateway", "pass"), ("claude gateway", "pass")} <= checks
    point_at(lane, gateway, key=None)
    missing = doctor(lane)
    failed = [c for c in missing["checks"] if c["name"] == "codex gateway"]
    assert [c["level"] for c in failed] == ["fail"] and "CORP_LLM_KEY" in failed[0]["detail"]
    assert missing["exit_status"] == 1
    assert not any(secret in json.dumps(missing) for secret in SECRETS)


def test_doctor_warns_when_the_gateway_does_not_answer(lane: Lane) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        closed = taken.getsockname()[1]
    point_at(lane, closed)
    checks = [c for c in doctor(lane)["checks"] if c["name"].endswith("gateway")]
    assert {c["level"] for c in checks} == {"warn"}
    assert all("cannot connect" in c["detail"] for c in checks)
