"""``doctor``'s router check against the loopback router stand-in."""

from __future__ import annotations

from pathlib import Path

from lane_runner import config
from lane_runner.cli import doctor
from lane_runner.cli.checks import Level
from tests.router.conftest import ScriptedRouter


def _cfg(tmp_path: Path, url: str) -> config.Config:
    return config.load(tmp_path, environ={"LANE_RUNNER_ROUTER_URL": url})


def test_no_router_url_means_no_router_check(cfg: config.Config) -> None:
    assert doctor.router_check(cfg) == []


def test_a_router_that_routes_passes_and_says_where(
    tmp_path: Path, server: ScriptedRouter
) -> None:
    server.select("worker/codex/gpt-5.1-codex/high", rationale="hard task")
    (check,) = doctor.router_check(_cfg(tmp_path, server.url))
    assert check.level is Level.PASS
    assert "codex" in check.detail and "high" in check.detail
    assert server.models() == ["lane/worker/auto"]


def test_a_router_that_answers_nonsense_fails_with_its_words_and_a_fix(
    tmp_path: Path, server: ScriptedRouter
) -> None:
    server.reply(status=200, body=b'{"choices": []}')  # no selection header
    (check,) = doctor.router_check(_cfg(tmp_path, server.url))
    assert check.level is Level.FAIL
    assert server.url in check.fix


def test_a_router_with_a_broken_encoding_is_a_failed_check_not_a_traceback(
    tmp_path: Path, server: ScriptedRouter
) -> None:
    server.reply(body=b"not gzip", headers={"content-encoding": "gzip"})
    (check,) = doctor.router_check(_cfg(tmp_path, server.url))
    assert check.level is Level.FAIL and "DecodingError" in check.detail
