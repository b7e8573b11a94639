"""The pure rules of the router contract: selections, body override, the Route record."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lane_runner.names import parse_lane
from lane_runner.router.errors import RoutingError
from lane_runner.router.route import (
    MAX_REASON_CHARS,
    Route,
    Selection,
    body_wins,
    bounded,
    parse_selection,
    route_for,
)

ROUTE = Route("codex", "gpt-5.1-codex", "high", "codex-high", "router", "fits codex", 12)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("worker/codex/gpt-5.1-codex/high", Selection("codex", "gpt-5.1-codex", "high")),
        (" worker/claude/claude-opus-4-5/xhigh\n", Selection("claude", "claude-opus-4-5", "xhigh")),
    ],
)
def test_parse_selection_accepts_the_contract_form(value, expected):
    assert parse_selection(value) == expected
    assert expected.target == value.strip()


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("", "malformed"),
        ("worker", "malformed"),
        ("worker/codex/high", "malformed"),
        ("route/codex/gpt-5/high", "malformed"),
        ("worker//gpt-5/high", "malformed"),
        ("worker/codex/gpt-5/high/x", "malformed"),
        ("worker/openai/gpt-5/high", "unsupported"),
        ("worker/codex/gpt-5/HIGH", "unsupported"),
    ],
)
def test_parse_selection_refuses_anything_else_quoting_it(value, kind):
    with pytest.raises(RoutingError, match=kind) as raised:
        parse_selection(value)
    assert repr(value) in str(raised.value)


@pytest.mark.parametrize(
    ("header", "body", "wins"),
    [
        ("worker/codex/gpt-5/high", "worker/codex/gpt-5.1-codex-max/high", True),
        ("worker/claude/claude-sonnet/low", "worker/claude/claude-sonnet-4-5/low", True),
        ("worker/codex/gpt-5/high", "worker/codex/gpt-5/medium", False),
        ("worker/codex/gpt-5/high", "worker/claude/gpt-5/high", False),
        ("worker/codex/gpt-5/high", "worker/codex/claude-x/high", False),
        ("worker/claude/claude-sonnet/low", "worker/claude/gpt-5/low", False),
        ("worker/claude/claude-sonnet/low", "worker/claude/sonnet/low", False),
    ],
)
def test_body_wins_only_for_same_provider_effort_and_model_family(header, body, wins):
    assert body_wins(parse_selection(header), parse_selection(body)) is wins


@pytest.mark.parametrize(
    ("assignee", "route_id"),
    [
        ("cli-auto", "lane/worker/auto"),
        ("cli-codex-low", "lane/worker/manual/codex/low"),
        ("cli-claude-xhigh", "lane/worker/manual/claude/xhigh"),
    ],
)
def test_route_ids(assignee, route_id):
    assert route_for(parse_lane(assignee)) == route_id


def test_describe_is_one_line_with_the_essentials():
    route = Route("claude", "claude-opus-4-5", "xhigh", "claude-xhigh", "static", "a\nb", 0)
    assert route.describe() == (
        "route: claude/claude-opus-4-5 at xhigh effort (classifier static, 0 ms): a b"
    )


@settings(max_examples=60)
@given(st.text(max_size=3 * MAX_REASON_CHARS))
def test_bounded_is_one_short_line(text):
    line = bounded(text)
    assert "\n" not in line and "\r" not in line
    assert len(line) <= MAX_REASON_CHARS + len("… [100000 more characters]")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line)  # no terminal control
    plain = not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)
    if len(text) <= MAX_REASON_CHARS and text == " ".join(text.split()) and plain:
        assert line == text
