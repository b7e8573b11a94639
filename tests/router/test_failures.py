"""A broken router or a typo costs nothing: every failure to route or judge is a
``RoutingError`` with a cause, and the cause decides cooldown or block
(docs/ARCHITECTURE.md §3.5). Against the real loopback router stand-in."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from lane_runner import config
from lane_runner.board.model import BlockKind, Outcome, Status
from lane_runner.errors import UsageError
from lane_runner.router import Cause, HttpRouter, RouterJudge, RoutingError
from lane_runner.router.errors import TRANSIENT_CAUSES
from lane_runner.router.route import parse_selection
from lane_runner.run import decide
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import Services, build
from tests.harness import BOARD, Lane
from tests.harness import lane as lane  # noqa: F401 - the fixture, used below
from tests.router.conftest import ScriptedRouter

CONTEXT = "Task 9: fix the flaky test."
DONE = {
    "status": "completed",
    "summary": "fixed the race and ran the suite",
    "changed_files": ["a.py"],
    "tests_run": ["pytest"],
    "artifacts": [],
    "findings": [],
    "blockers": [],
}


def test_a_bad_content_encoding_is_a_permanent_error_not_a_crash(server, router):
    server.reply(
        body=b"this is not gzip",
        headers={"content-encoding": "gzip", "x-model-router-selected-model": "worker/codex/m/low"},
    )
    with pytest.raises(RoutingError, match="DecodingError") as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.cause is Cause.BAD_RESPONSE and not raised.value.transient
    assert len(server.requests) == 1  # asking again cannot help


@pytest.mark.parametrize("status", [408, 429, 502])
def test_throttling_and_server_errors_are_retried_then_transient(server, router, status):
    for _ in range(3):
        server.reply(status=status, body=b"slow down")
    with pytest.raises(RoutingError, match=f"after 3 attempts: HTTP {status}") as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.cause is Cause.BUSY and raised.value.transient


@pytest.mark.parametrize("status", [401, 403, 404, 422, 301])
def test_any_other_refusal_is_permanent_and_asked_once(server, router, status):
    server.reply(status=status, body=b"no such route")
    with pytest.raises(RoutingError, match=f"HTTP {status}: no such route") as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.cause is Cause.REFUSED and not raised.value.transient
    assert len(server.requests) == 1


@pytest.mark.parametrize("url", ["127.0.0.1:8080/v1/chat/completions", "ftp://router/v1"])
def test_a_url_the_client_cannot_request_is_a_permanent_error(client, url):
    router = HttpRouter(url, client, timeout=1.0, retries=2, backoff=0.01)
    with pytest.raises(RoutingError) as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.cause is Cause.BAD_URL and not raised.value.transient


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8080/v1", "router.local/v1", "ftp://router/", "http://", "http://r:99999/"]
)
def test_config_refuses_a_router_url_that_cannot_work(tmp_path, url):
    with pytest.raises(UsageError, match="bad value for router_url"):
        config.load(tmp_path, environ={"LANE_RUNNER_ROUTER_URL": url})


def test_config_show_exits_2_naming_router_url(lane: Lane) -> None:
    lane.write_config(router_url="localhost:8080/v1/chat/completions")
    done = lane.cli("config", "show")
    assert done.returncode == 2
    assert "router_url" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "model", ["-oProxyCommand=touch", "gpt 5", "--dangerously-skip-permissions", "gpt$(id)"]
)
def test_an_unsafe_model_is_a_permanent_error_quoting_the_router(server, router, model):
    server.select(f"worker/codex/{model}/high", rationale="trust me")
    with pytest.raises(RoutingError, match="unsafe model") as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.cause is Cause.BAD_SELECTION and not raised.value.transient
    assert model in str(raised.value) and "trust me" in str(raised.value)


@pytest.mark.parametrize("model", ["gpt\n5", "gpt\x1b[2J", "x" * 129, "\u00e9"])
def test_a_selection_with_control_characters_is_refused_escaped(model):
    with pytest.raises(RoutingError, match="unsafe model") as raised:
        parse_selection(f"worker/codex/{model}/high")
    assert "\n" not in str(raised.value) and "\x1b" not in str(raised.value)


def test_an_unsafe_model_in_the_body_never_refines_the_header(server, router):
    server.select("worker/codex/gpt-5/high", content="worker/codex/-c/high")
    assert router.route(CONTEXT, "cli-auto").model == "gpt-5"


def test_config_refuses_an_unsafe_static_model(tmp_path):
    with pytest.raises(UsageError, match="codex_models"):
        config.load(tmp_path, environ={"LANE_RUNNER_CODEX_MODELS": "high=-c x"})


def test_the_router_judge_keeps_the_structural_verdict_when_the_router_breaks(server, router):
    server.reply(body=b"\x00garbage", headers={"content-encoding": "br"})
    verdict = RouterJudge(router).judge(CONTEXT, DONE)
    assert verdict.accepted and "router judge unavailable" in verdict.reason


def test_the_router_judge_keeps_the_structural_verdict_on_any_failure(server, router):
    odd = {**DONE, "findings": [object()]}  # cannot be serialised for the router
    verdict = RouterJudge(router).judge(CONTEXT, odd)
    assert verdict.accepted and server.requests == []


# -- the decision and its effect ------------------------------------------------


@pytest.mark.parametrize("cause", list(Cause))
def test_each_cause_decides_cooldown_block_or_abandon(cause):
    decision = decide.after_routing_error(RoutingError("router said no", cause))
    assert "router said no" in decision.reason and cause.value in decision.reason
    if cause is Cause.CANCELLED:
        assert decision.step is decide.Step.ABANDON
    elif cause in TRANSIENT_CAUSES:
        assert (decision.step, decision.outcome) == (decide.Step.COOLDOWN, Outcome.RECLAIMED)
    else:
        assert (decision.step, decision.kind) == (decide.Step.BLOCK, BlockKind.CAPABILITY)


@pytest.fixture
def routed(
    lane: Lane, server: ScriptedRouter, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Services]:
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("LANE_RUNNER_SIM_CONTROL", str(lane.control))
    cfg = config.load(lane.root, {}).replace(router_url=server.url, router_timeout=5)
    built = build(cfg)
    yield built
    built.close()


def run_one(services: Services, lane: Lane, assignee: str = "cli-auto"):
    task = lane.add("routed", body="[sim:ok]", assignee=assignee)
    claim = services.store.board(BOARD).claim(services.node, 60, "cli-auto")
    assert claim is not None
    return task, RunExecutor(services, claim).execute()


def test_a_refusing_router_blocks_the_task_with_its_words(routed, lane, server):
    server.reply(status=400, body=json.dumps({"error": "unknown route id"}).encode())
    task, report = run_one(routed, lane)
    assert report.ended == "block"
    blocked = lane.board.get_task(task.id)
    assert blocked.status is Status.BLOCKED and blocked.block_kind is BlockKind.CAPABILITY
    assert blocked.failure_count == 0
    [run] = lane.runs(task.id)
    assert "unknown route id" in (run.reason or "") and "refused" in (run.reason or "")


def test_a_manual_lane_answered_with_another_provider_is_blocked(routed, lane, server):
    server.select("worker/claude/claude-opus-4-5/high", rationale="claude knows best")
    task, report = run_one(routed, lane, assignee="cli-codex-high")
    assert report.ended == "block" and "claude knows best" in report.reason
    assert lane.board.get_task(task.id).block_kind is BlockKind.CAPABILITY


def test_a_router_that_is_down_cools_the_task_down_uncounted(routed, lane, server):
    for _ in range(4):
        server.reply(status=503, body=b"restarting")
    task, report = run_one(routed, lane)
    assert report.ended == "cooldown"
    waiting = lane.board.get_task(task.id)
    assert waiting.status is Status.READY and waiting.failure_count == 0
    assert waiting.next_attempt_at is not None


def test_a_static_policy_without_a_model_for_the_effort_blocks(lane, monkeypatch):
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("LANE_RUNNER_SIM_CONTROL", str(lane.control))
    cfg = config.load(lane.root, {}).replace(codex_models={"low": "gpt-5.1-codex-mini"})
    services = build(cfg)
    try:
        task, report = run_one(services, lane, assignee="cli-codex-high")
    finally:
        services.close()
    assert report.ended == "block" and "codex_models.high" in report.reason
    assert lane.board.get_task(task.id).block_kind is BlockKind.CAPABILITY


def test_doctor_with_a_broken_router_prints_a_failed_check_not_a_traceback(
    lane: Lane, server: ScriptedRouter
) -> None:
    server.reply(body=b"not gzip", headers={"content-encoding": "gzip"})
    lane.write_config(router_url=server.url, router_timeout=5)
    done = lane.cli("doctor")
    assert done.returncode == 1
    assert "DecodingError" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_the_routers_control_characters_never_reach_a_reason(server, router):
    server.say("reject: \x1b[2J\x1b]0;owned\x07the tests\x00 fail")
    verdict = router.judge(CONTEXT, "{}")
    assert not verdict.accepted
    assert verdict.reason == "\\x1b[2J\\x1b]0;owned\\x07the tests\\x00 fail"
