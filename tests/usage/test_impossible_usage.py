"""Impossible usage figures are recorded as unknown and said, never taken as none
(issue 48, item 6: a report of 2**70 input tokens was recorded as 0, silently)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from lane_runner.providers import claude, codex
from lane_runner.providers.reading import Reading
from lane_runner.providers.usage import MAX_TOKENS, tokens
from lane_runner.run.usage_note import Unknown
from lane_runner.usage.ledger import Attempt, Ledger

CODEX = codex.ADAPTER
CLAUDE = claude.ADAPTER

#: As codex writes it on its stream; orjson (the adapters' reader) reads it as a float.
HUGE = b'{"type": "turn.completed", "usage": {"input_tokens": 1180591620717411303424, ' \
       b'"cached_input_tokens": 0, "output_tokens": 80}}'


@pytest.mark.parametrize("said", [2**70, float(2**70), MAX_TOKENS + 1, -1, 1.5, "12", True])
def test_a_count_that_cannot_be_one_is_unknown(said: object) -> None:
    counted = tokens(input=said, output=80)
    assert counted.tokens["input"] == 0 and counted.tokens["output"] == 80
    assert counted.unknown == ("input",)


def test_counts_up_to_the_bound_and_missing_kinds_are_as_said() -> None:
    counted = tokens(input=MAX_TOKENS, output=0)
    assert counted.tokens["input"] == MAX_TOKENS and counted.unknown == ()


def test_codex_reporting_two_to_the_seventy_is_recorded_as_unknown(tmp_path: Path) -> None:
    reading = Reading(session_id="th", model="gpt-5")
    CODEX.observe(reading, orjson.loads(HUGE))
    [report] = reading.take_usage()
    assert report.unknown == ("input",) and report.models["gpt-5"]["output"] == 80
    [record] = Ledger(tmp_path).record(Attempt("work", "t1", 1, 1, "codex"), report, {}, 1.0)
    assert record.unknown == ("input",) and record.tokens["input"] == 0


def test_claude_reporting_a_negative_count_is_recorded_as_unknown() -> None:
    reading = Reading(session_id="s")
    CLAUDE.observe(reading, {"type": "result", "session_id": "s", "modelUsage": {
        "claude-sonnet-4-5": {"inputTokens": -5, "outputTokens": 3, "costUSD": 0.01}}})
    [report] = reading.take_usage()
    assert report.unknown == ("input",)


def test_the_run_says_it_once_per_provider_and_kind() -> None:
    unknown = Unknown()
    unknown.add("codex", ("input",))
    unknown.add("codex", ("input",))
    [said] = unknown.take()
    assert said.startswith("codex reported an impossible number of input tokens")
    assert "recorded as unknown" in said
    unknown.add("codex", ("input",))
    assert unknown.take() == []
