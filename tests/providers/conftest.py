"""Shared fixtures: the simulators installed in a temp bin dir, and a request builder."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lane_runner.providers import ProviderRequest, claude, codex, worker_environment
from lane_runner.providers.simulators import install
from schemas import load_bytes

CLAUDE = claude.ADAPTER

RequestFactory = Callable[..., ProviderRequest]


@pytest.fixture
def sim_bin(tmp_path: Path) -> dict[str, Path]:
    return install(tmp_path / "bin")


@pytest.fixture
def make_request(tmp_path: Path, sim_bin: dict[str, Path]) -> RequestFactory:
    schema = tmp_path / "worker-result.wire.json"
    schema.write_bytes(load_bytes("worker-result.wire.json"))
    settings = tmp_path / "claude-settings.json"
    settings.write_text(CLAUDE.settings_file())
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    counter = iter(range(1, 1000))

    def build(provider: str, prompt: str = "Fix the bug", **overrides: Any) -> ProviderRequest:
        number = next(counter)
        extra = {"CODEX_HOME": str(tmp_path / "codex-home"),
                 "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-home"),
                 # Tests run as root on CI: declare the throw-away sandbox the claude
                 # root guard asks for (test_root_guard covers the refusal itself).
                 "IS_SANDBOX": "1"}
        fields: dict[str, Any] = {
            "provider": provider,
            "executable": sim_bin[provider],
            "model": "gpt-5.5" if provider == "codex" else "claude-sonnet-4-5",
            "effort": "high",
            "prompt": prompt,
            "workspace": workspace,
            "schema_path": schema,
            "settings_path": settings,
            "result_file": tmp_path / f"t1.run-1.provider-{number}.result.json",
            "session_id": str(uuid.uuid4()) if provider == "claude" else None,
            "resume": False,
            "log_path": tmp_path / "logs" / "t1.log",
            "env": worker_environment(provider, extra=extra),
            "deadline": time.monotonic() + 60,
            "heartbeat_interval": 0.2,
            "stall_timeout": 30,
            "kill_grace": 0.5,
        }
        fields.update(overrides)
        return ProviderRequest(**fields)

    return build


def codex_argv(req: ProviderRequest, thread_id: str | None) -> list[str]:
    """codex's command line for ``req``: a new thread, else ``exec resume`` of ``thread_id``."""
    return codex.ADAPTER.argv(replace(req, session_id=thread_id), resume=thread_id is not None,
                              result_file=req.result_file, schema="")


def claude_argv(req: ProviderRequest, session_id: str, resume: bool, schema: str) -> list[str]:
    """claude's command line for ``req`` with ``session_id`` reserved or resumed."""
    return claude.ADAPTER.argv(replace(req, session_id=session_id), resume=resume,
                               result_file=req.result_file, schema=schema)
