"""Routing as the ancestor runner's router expects: configurable route ids, health
exclusion for ``cli-auto`` only, and the ancestor's provider health files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.cli import doctor
from lane_runner.cli.checks import Level
from lane_runner.errors import UsageError
from lane_runner.home import Home
from lane_runner.router import RouteIds, make_router
from lane_runner.router.health import (
    FRESH_SECONDS,
    excluded_provider,
    exclusion_for,
    read_health,
    record_failure,
)
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import build
from tests.harness import BOARD, Lane
from tests.harness import lane as lane  # noqa: F401 - the fixture, used below
from tests.router.conftest import ScriptedRouter

CONTEXT = "Task 5: route me as the ancestor did."
ANCESTOR = {
    "LANE_RUNNER_ROUTER_AUTO_ROUTE": "atlas/worker/auto/maximum",
    "LANE_RUNNER_ROUTER_MANUAL_ROUTE": "atlas/worker/manual/{provider}/{effort}",
    "LANE_RUNNER_ROUTER_JUDGE_ROUTE": "atlas/judge",
}


def test_route_ids_are_configurable(tmp_path: Path, server: ScriptedRouter) -> None:
    cfg = config.load(tmp_path, environ={**ANCESTOR, "LANE_RUNNER_ROUTER_URL": server.url})
    router = make_router(cfg)
    server.select("worker/codex/gpt-5.1-codex-max/xhigh")
    server.select("worker/claude/claude-opus-4-5/high")
    server.say("accept")
    try:
        router.route(CONTEXT, "cli-auto")
        router.route(CONTEXT, "cli-claude-high")
        router.judge(CONTEXT, "{}")  # type: ignore[attr-defined]
    finally:
        router.close()
    assert server.models() == [
        "atlas/worker/auto/maximum",
        "atlas/worker/manual/claude/high",
        "atlas/judge",
    ]


def test_the_default_route_ids_are_todays(tmp_path: Path) -> None:
    cfg = config.load(tmp_path, environ={})
    assert (
        RouteIds(cfg.router_auto_route, cfg.router_manual_route, cfg.router_judge_route)
        == RouteIds()
    )
    assert RouteIds().manual == "lane/worker/manual/{provider}/{effort}"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ROUTER_MANUAL_ROUTE", "atlas/worker/manual"),  # the lane would be lost
        ("ROUTER_MANUAL_ROUTE", "x/{provider}/{effort}/{model}"),
        ("ROUTER_AUTO_ROUTE", "atlas/{provider}"),
        ("ROUTER_AUTO_ROUTE", "atlas auto"),
        ("ROUTER_JUDGE_ROUTE", ""),
        ("ROUTER_MANUAL_ROUTE", "x/{provider/{effort}"),
    ],
)
def test_config_refuses_a_route_id_that_cannot_work(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(UsageError, match=key.lower()):
        config.load(tmp_path, environ={f"LANE_RUNNER_{key}": value})


def ancestor_file(directory: Path, provider: str, document: dict[str, object], age: float) -> Path:
    """A health file as the ancestor wrote it: no provider, no checked_at, aged by mtime."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{provider}.json"
    path.write_text(json.dumps(document))
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def test_an_ancestor_health_file_is_read_and_aged_by_its_mtime(tmp_path: Path) -> None:
    ancestor_file(tmp_path, "claude", {"state": "unavailable", "authenticated": False}, 3600)
    health = read_health(tmp_path, "claude")
    assert health is not None
    assert (health.provider, health.state, health.authenticated) == ("claude", "unavailable", False)
    assert excluded_provider([health], time.time())[0] == "claude"  # type: ignore[index]


def test_an_ancestor_capacity_file_goes_stale_like_ours(tmp_path: Path) -> None:
    ancestor_file(tmp_path, "codex", {"state": "unavailable"}, FRESH_SECONDS + 60)
    health = read_health(tmp_path, "codex")
    assert health is not None and health.authenticated and not health.fresh(time.time())


def test_doctor_says_what_each_health_file_says_or_why_it_is_ignored(tmp_path: Path) -> None:
    home = Home(tmp_path)
    home.ensure()
    ancestor_file(home.provider_health, "codex", {"state": "unavailable"}, 60)
    (home.provider_health / "claude.json").write_text('{"state": "sleepy"}')
    codex, claude = doctor.health_checks(home, time.time())
    assert codex.level is Level.PASS and "cli-auto routing avoids it" in codex.detail
    assert claude.level is Level.WARN
    assert "is ignored" in claude.detail and "sleepy" in claude.detail and claude.fix


def test_health_exclusion_applies_to_cli_auto_only(tmp_path: Path) -> None:
    health = record_failure(tmp_path, "codex", "capacity", "usage limit")
    now = time.time()
    assert exclusion_for("cli-auto", [health], now) is not None
    assert exclusion_for("cli-codex-high", [health], now) is None
    assert exclusion_for("cli-claude-low", [health], now) is None


@pytest.mark.parametrize(
    ("assignee", "provider"), [("cli-codex-low", "codex"), ("cli-auto", "claude")]
)
def test_a_manual_lane_keeps_its_provider_despite_fresh_bad_health(
    lane: Lane, monkeypatch: pytest.MonkeyPatch, assignee: str, provider: str
) -> None:
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("LANE_RUNNER_SIM_CONTROL", str(lane.control))
    services = build(config.load(lane.root, {}))
    try:
        record_failure(services.home.provider_health, "codex", "capacity", "usage limit")
        lane.add("health", assignee=assignee)
        claim = services.store.board(BOARD).claim(services.node, 60, "cli-auto")
        assert claim is not None
        report = RunExecutor(services, claim).execute()
    finally:
        services.close()
    assert (report.ended, report.provider) == ("committed", provider), report.reason
