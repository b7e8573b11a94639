"""Usage-limit resets read from the CLIs' words: the moment each names (pure)."""

from __future__ import annotations

import datetime

from lane_runner.providers import claude, codex
from lane_runner.providers.reading import Reading

CLAUDE = claude.ADAPTER

#: 2026-12-01 23:38:57 UTC, a Tuesday.
NOW = datetime.datetime(2026, 12, 1, 23, 38, 57, tzinfo=datetime.UTC).timestamp()


def utc(*parts: int) -> float:
    return datetime.datetime(*parts, tzinfo=datetime.UTC).timestamp()


def test_claude_names_the_reset_in_a_zone() -> None:
    said = claude.limit_of("You've hit your session limit · resets 8pm (America/New_York)", NOW)
    assert said is not None and said.resets_at == utc(2026, 12, 2, 1, 0)
    said = claude.limit_of("You've hit your 5-hour limit · resets 2:38am (UTC)", NOW)
    assert said is not None and said.resets_at == utc(2026, 12, 2, 2, 38)
    said = claude.limit_of("You've hit your weekly limit · resets Dec 5, 5pm (UTC)", NOW)
    assert said is not None and said.resets_at == utc(2026, 12, 5, 17, 0)


def test_claude_words_without_a_zone_are_read_in_the_clis_zone() -> None:
    said = claude.limit_of("You've hit your session limit · resets 3pm", NOW, "Europe/Berlin")
    assert said is not None and said.resets_at == utc(2026, 12, 2, 14, 0)


def test_an_unknown_zone_or_no_reset_leaves_the_reset_unsaid() -> None:
    said = claude.limit_of("You've hit your session limit · resets 3pm (Mars/Olympus)", NOW)
    assert said is not None and said.resets_at is None
    assert claude.limit_of("Credit balance is too low", NOW) is None


def test_the_rate_limit_event_gives_the_exact_reset() -> None:
    reading = Reading(session_id="s", clock=lambda: NOW)
    CLAUDE.observe(reading, {"type": "rate_limit_event", "session_id": "s", "rate_limit_info": {
        "status": "rejected", "resetsAt": 1796179090, "rateLimitType": "five_hour"}})
    CLAUDE.observe(reading, {"type": "assistant", "session_id": "s", "error": "rate_limit",
                             "message": {"model": "<synthetic>", "content": [
                                 {"type": "text",
                                  "text": "You've hit your 5-hour limit · resets 2:38am (UTC)"}]}})
    assert reading.limit is not None and reading.limit.resets_at == 1796179090
    assert reading.take_usage() == []  # claude's made-up message spent nothing
    warning = Reading(session_id="s")
    CLAUDE.observe(warning, {"type": "rate_limit_event", "rate_limit_info": {
        "status": "allowed_warning", "resetsAt": 1796179090}})
    assert warning.limit is None


def test_codex_says_try_again_at_in_its_local_zone() -> None:
    said = codex.limit_of("You've hit your usage limit. … or try again at 3:28 PM.", NOW, "UTC")
    assert said is not None and said.resets_at == utc(2026, 12, 2, 15, 28)
    said = codex.limit_of("You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/"
                          "explore/pro), visit https://chatgpt.com/settings/usage to purchase "
                          "more credits or try again at Dec 2nd, 2026 2:38 AM.", NOW,
                          "America/New_York")
    assert said is not None and said.resets_at == utc(2026, 12, 2, 7, 38)
    said = codex.limit_of("You've hit your usage limit. … or try again later.", NOW, "UTC")
    assert said is not None and said.resets_at is None
    assert codex.limit_of("exceeded retry limit, last status: 429", NOW, "UTC") is None
