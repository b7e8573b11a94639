"""The embedded static policy: every assignee, with and without an excluded provider."""

from __future__ import annotations

import pytest

from lane_runner.errors import UsageError
from lane_runner.router import Route, RoutingError, StaticPolicy

CODEX = {"low": "c-low", "medium": "c-med", "high": "c-high", "xhigh": "c-max"}
CLAUDE = {"low": "a-low", "medium": "a-med", "high": "a-high", "xhigh": "a-max"}
MODELS = {"codex": CODEX, "claude": CLAUDE}
MANUAL = [(p, e) for p in ("codex", "claude") for e in ("low", "medium", "high", "xhigh")]


@pytest.fixture
def policy(cfg):
    """A host with codex and claude installed: each hands over to the other."""
    return StaticPolicy(cfg.replace(codex_models=CODEX, claude_models=CLAUDE), ("codex", "claude"))


@pytest.mark.parametrize(("provider", "effort"), MANUAL)
def test_manual_lane_is_honoured_as_given(policy, provider, effort):
    route = policy.route("ctx", f"cli-{provider}-{effort}")
    assert route == Route(
        provider,
        MODELS[provider][effort],
        effort,
        f"{provider}-{effort}",
        "static",
        f"static policy: manual lane cli-{provider}-{effort}",
        route.latency_ms,
    )


def test_a_fallback_goes_to_the_next_installed_provider_in_the_registrys_order(cfg):
    """With every CLI installed the order is codex, claude, opencode, gemini, round; a CLI
    that is not installed is passed over (issue 43)."""
    every = StaticPolicy(cfg)
    assert [every.route("ctx", f"cli-{p}-low", p, "hit its usage limit").provider
            for p in ("codex", "claude", "opencode", "gemini")] == [
        "claude", "opencode", "gemini", "codex"]
    some = StaticPolicy(cfg, ("codex", "gemini"))
    assert some.route("ctx", "cli-codex-low", "codex", "x").provider == "gemini"
    assert some.route("ctx", "cli-gemini-low", "gemini", "x").provider == "codex"
    assert some.route("ctx", "cli-claude-low", "claude", "x").provider == "gemini"


@pytest.mark.parametrize(("provider", "effort"), MANUAL)
def test_manual_lane_of_an_excluded_provider_moves_to_the_other_at_its_effort(
    policy, provider, effort
):
    other = "claude" if provider == "codex" else "codex"
    route = policy.route("ctx", f"cli-{provider}-{effort}", provider, "is not logged in")
    assert (route.provider, route.model, route.effort) == (other, MODELS[other][effort], effort)
    assert f"{provider} is not logged in" in route.reason


@pytest.mark.parametrize(("provider", "effort"), MANUAL)
def test_excluding_the_other_provider_changes_nothing_for_a_manual_lane(policy, provider, effort):
    other = "claude" if provider == "codex" else "codex"
    route = policy.route("ctx", f"cli-{provider}-{effort}", other, "is down")
    assert (route.provider, route.effort) == (provider, effort)


@pytest.mark.parametrize(
    ("preference", "effort", "exclude", "provider"),
    [
        (("codex", "claude"), "high", None, "codex"),
        (("claude", "codex"), "low", None, "claude"),
        (("codex", "claude"), "xhigh", "codex", "claude"),
        (("codex", "claude"), "medium", "claude", "codex"),
        (("claude",), "high", None, "claude"),
        (("claude",), "high", "claude", "codex"),
    ],
)
def test_auto_lane_takes_the_first_preferred_provider_not_excluded(
    cfg, preference, effort, exclude, provider
):
    policy = StaticPolicy(
        cfg.replace(
            codex_models=CODEX,
            claude_models=CLAUDE,
            provider_preference=list(preference),
            default_effort=effort,
        )
    )
    route = policy.route("ctx", "cli-auto", exclude, "is out of capacity" if exclude else None)
    assert (route.provider, route.model, route.effort) == (
        provider,
        MODELS[provider][effort],
        effort,
    )
    assert route.classifier == "static"
    assert ("is out of capacity" in route.reason) is (exclude == preference[0])


def test_defaults_route_cli_auto_without_any_router(cfg):
    route = StaticPolicy(cfg).route("ctx", "cli-auto")
    assert (route.provider, route.model, route.effort) == ("codex", "gpt-5.1-codex", "high")


def test_missing_model_for_an_effort_names_the_config_key(cfg):
    policy = StaticPolicy(cfg.replace(codex_models={"high": "c-high"}))
    with pytest.raises(RoutingError, match=r"codex_models\.low"):
        policy.route("ctx", "cli-codex-low")


def test_foreign_assignee_is_a_usage_error(policy):
    with pytest.raises(UsageError):
        policy.route("ctx", "human-reviewer")


def test_fallback_goes_to_the_other_provider_at_the_same_effort(policy):
    failed = policy.route("ctx", "cli-codex-medium")
    route = policy.fallback("ctx", failed, "hit its usage limit")
    assert (route.provider, route.model, route.effort) == ("claude", "a-med", "medium")
    assert route.classifier == "static-fallback"
    assert route.reason.startswith(
        "codex hit its usage limit; fell back to claude at medium effort"
    )
