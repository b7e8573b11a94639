"""The HTTP router client against a real loopback server (docs/ARCHITECTURE.md §3.5)."""

from __future__ import annotations

import socket

import pytest

from lane_runner.router import Cause, HttpRouter, Route, RoutingError, StaticPolicy, make_router
from lane_runner.router.route import MAX_REASON_CHARS

CONTEXT = "Task 7: make the parser accept empty files."


def test_auto_lane_request_and_answer_follow_the_contract(server, router):
    server.select("worker/codex/gpt-5.1-codex/high", rationale="multi-file refactor")
    route = router.route(CONTEXT, "cli-auto")
    [request] = server.requests
    assert request["json"] == {
        "model": "lane/worker/auto",
        "messages": [{"role": "user", "content": CONTEXT}],
        "max_tokens": 1,
        "stream": False,
    }
    assert request["headers"]["content-type"] == "application/json"
    assert (route.provider, route.model, route.effort) == ("codex", "gpt-5.1-codex", "high")
    assert (route.profile, route.classifier, route.reason) == (
        "codex-high",
        "router",
        "multi-file refactor",
    )
    assert route.latency_ms >= 0


@pytest.mark.parametrize("provider", ["codex", "claude"])
@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh"])
def test_manual_lane_uses_its_route_id(server, router, provider, effort):
    server.select(f"worker/{provider}/some-model/{effort}")
    route = router.route(CONTEXT, f"cli-{provider}-{effort}")
    assert server.models() == [f"lane/worker/manual/{provider}/{effort}"]
    assert (route.provider, route.effort, route.classifier) == (provider, effort, "router-manual")
    assert route.reason == f"router selected worker/{provider}/some-model/{effort}"


def test_exclusion_appends_the_routing_constraint(server, router):
    server.select("worker/claude/claude-sonnet-4-5/high")
    router.route(CONTEXT, "cli-auto", exclude="codex", exclude_reason="is out of capacity")
    content = server.requests[0]["json"]["messages"][0]["content"]
    assert content == (
        CONTEXT + "\n\nRouting constraint: the codex provider is out of capacity. Do not select it."
    )


def test_body_with_a_more_specific_model_wins(server, router):
    server.select("worker/codex/gpt-5/high", content="worker/codex/gpt-5.1-codex-max/high")
    assert router.route(CONTEXT, "cli-auto").model == "gpt-5.1-codex-max"


@pytest.mark.parametrize(
    "content",
    [
        "worker/claude/claude-opus-4-5/high",  # another provider
        "worker/codex/gpt-5.1-codex-max/low",  # another effort
        "worker/codex/o3-pro/high",  # not a codex model name
        "worker/codex/gpt-5.1/high/extra",  # malformed
        "I picked codex",  # prose
        None,  # no content at all
    ],
)
def test_body_that_does_not_refine_the_header_is_ignored(server, router, content):
    server.select("worker/codex/gpt-5/high", content=content)
    route = router.route(CONTEXT, "cli-auto")
    assert (route.provider, route.model, route.effort) == ("codex", "gpt-5", "high")


def test_body_that_is_not_json_leaves_the_header_standing(server, router):
    server.reply(
        body=b"<html>oops", headers={"x-model-router-selected-model": "worker/claude/c/low"}
    )
    assert router.route(CONTEXT, "cli-auto").model == "c"


@pytest.mark.parametrize(
    ("selection", "kind"),
    [
        ("codex/gpt-5/high", "malformed"),
        ("worker/codex//high", "malformed"),
        ("worker/codex/gpt-5/high/now", "malformed"),
        ("worker/aider/gemini-3/high", "unsupported"),
        ("worker/codex/gpt-5/maximum", "unsupported"),
    ],
)
def test_bad_selection_is_an_error_with_the_routers_words(server, router, selection, kind):
    server.select(selection, rationale="tier unavailable today")
    with pytest.raises(RoutingError) as raised:
        router.route(CONTEXT, "cli-auto")
    message = str(raised.value)
    assert selection in message and kind in message and "tier unavailable today" in message
    assert not raised.value.transient
    assert len(server.requests) == 1


def test_missing_selection_header_is_an_error_with_the_routers_words(server, router):
    server.reply(headers={"x-model-router-rationale": "no worker route configured"})
    with pytest.raises(RoutingError, match="x-model-router-selected-model.*no worker route"):
        router.route(CONTEXT, "cli-auto")


def test_manual_lane_answered_with_another_lane_is_an_error(server, router):
    server.select("worker/claude/claude-opus-4-5/high", rationale="claude is better")
    with pytest.raises(RoutingError, match="honoured as given.*claude is better"):
        router.route(CONTEXT, "cli-codex-high")


def test_server_error_is_retried_then_succeeds(server, router):
    server.reply(status=503, body=b"warming up")
    server.select("worker/codex/gpt-5/medium")
    assert router.route(CONTEXT, "cli-auto").effort == "medium"
    assert len(server.requests) == 2


def test_server_errors_past_the_retries_are_a_transient_error(server, router):
    for _ in range(3):
        server.reply(status=500, body=b"database is down")
    server.select("worker/codex/gpt-5/medium")  # never reached: retries=2 means 3 requests
    with pytest.raises(
        RoutingError, match="after 3 attempts: HTTP 500: database is down"
    ) as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.transient
    assert len(server.requests) == 3


def test_client_error_is_not_retried_and_quotes_the_body(server, router):
    server.reply(status=400, body=b'{"error": "unknown route id lane/worker/auto"}')
    server.select("worker/codex/gpt-5/medium")
    with pytest.raises(RoutingError, match="HTTP 400.*unknown route id") as raised:
        router.route(CONTEXT, "cli-auto")
    assert not raised.value.transient
    assert len(server.requests) == 1


def test_a_silent_router_is_a_transient_timeout_at_the_calls_deadline(server, client):
    router = HttpRouter(server.url, client, timeout=0.2, retries=1, backoff=0.01)
    server.reply(delay=1.0)
    server.reply(delay=1.0)
    with pytest.raises(RoutingError, match="longer than 0.2 s") as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.transient and raised.value.cause is Cause.TIMEOUT
    assert len(server.requests) == 1  # no time was left for the retry


def test_connection_refused_is_a_transient_error(client):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    router = HttpRouter(url, client, timeout=1.0, retries=1, backoff=0.01)
    with pytest.raises(RoutingError, match="ConnectError") as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.transient and url in str(raised.value)


def test_huge_rationale_is_bounded_in_the_route(server, router):
    rationale = "because " + "x" * (60 * 1024)
    server.select("worker/claude/claude-opus-4-5/xhigh", rationale=rationale)
    route = router.route(CONTEXT, "cli-auto")
    assert route.reason.startswith("because xxx")
    assert route.reason.endswith(f"[{len(rationale) - MAX_REASON_CHARS} more characters]")
    assert len(route.reason) < MAX_REASON_CHARS + 100
    assert "\n" not in route.describe()


def test_header_beyond_what_http_allows_is_an_error_not_a_crash(server, client):
    router = HttpRouter(server.url, client, timeout=2.0, retries=0)
    server.select("worker/codex/gpt-5/low", rationale="x" * (200 * 1024))
    with pytest.raises(RoutingError, match="RemoteProtocolError"):
        router.route(CONTEXT, "cli-auto")


def test_oversized_body_is_refused(server, router):
    server.reply(
        body=b"x" * (2 << 20), headers={"x-model-router-selected-model": "worker/codex/gpt-5/low"}
    )
    with pytest.raises(RoutingError, match="more than 1048576 bytes"):
        router.route(CONTEXT, "cli-auto")


def test_health_guard_reroutes_when_the_router_picks_the_excluded_provider(server, router):
    server.select("worker/codex/gpt-5.1-codex/medium", rationale="codex fits")
    server.select("worker/claude/claude-sonnet-4-5/medium", rationale="manual claude")
    route = router.route(CONTEXT, "cli-auto", exclude="codex", exclude_reason="is not logged in")
    assert server.models() == ["lane/worker/auto", "lane/worker/manual/claude/medium"]
    assert (route.provider, route.model, route.effort) == ("claude", "claude-sonnet-4-5", "medium")
    assert route.classifier == "router-health-guard"
    assert route.reason.startswith("router selected excluded codex; claude at its medium effort")
    assert route.reason.endswith("manual claude")


def test_fallback_routes_the_other_provider_at_the_same_effort(server, router):
    failed = Route("claude", "claude-opus-4-5", "xhigh", "claude-xhigh", "router", "deep work", 3)
    server.select("worker/codex/gpt-5.1-codex-max/xhigh", rationale="manual codex")
    route = router.fallback(CONTEXT, failed, "hit its usage limit")
    [request] = server.requests
    assert request["json"]["model"] == "lane/worker/manual/codex/xhigh"
    assert (
        "the claude provider hit its usage limit. Do not select it."
        in (request["json"]["messages"][0]["content"])
    )
    assert (route.provider, route.model, route.effort) == ("codex", "gpt-5.1-codex-max", "xhigh")
    assert route.classifier == "router-manual-fallback"
    assert "claude hit its usage limit; fell back to codex at xhigh effort" in route.reason


@pytest.mark.parametrize(
    ("content", "accepted", "reason"),
    [
        ("accept", True, "the router judge accepted the answer"),
        ("  Accept\n", True, "the router judge accepted the answer"),
        ("reject: the tests were not run", False, "the tests were not run"),
        ("REJECT:   no migration   ", False, "no migration"),
    ],
)
def test_judge_reads_accept_or_reject(server, router, content, accepted, reason):
    server.say(content)
    verdict = router.judge(CONTEXT, '{"status": "completed"}')
    assert (verdict.accepted, verdict.reason) == (accepted, reason)
    [request] = server.requests
    assert request["json"]["model"] == "lane/judge"
    assert '{"status": "completed"}' in request["json"]["messages"][0]["content"]


@pytest.mark.parametrize("content", ["maybe", "reject", "reject:  ", "accepted", ""])
def test_judge_answer_outside_the_grammar_is_an_error(server, router, content):
    server.say(content)
    with pytest.raises(RoutingError, match="router judge answered"):
        router.judge(CONTEXT, "{}")


def test_make_router_picks_http_with_a_url_and_static_without(cfg, server):
    static = make_router(cfg)
    assert isinstance(static, StaticPolicy)
    http = make_router(cfg.replace(router_url=server.url, router_timeout=2))
    try:
        assert isinstance(http, HttpRouter)
        server.select("worker/claude/claude-haiku-4-5/low")
        assert http.route(CONTEXT, "cli-claude-low").model == "claude-haiku-4-5"
    finally:
        http.close()
    with pytest.raises(RoutingError, match="closed") as raised:  # the pooled client is released
        http.route(CONTEXT, "cli-auto")
    assert raised.value.cause is Cause.CLOSED and raised.value.transient
