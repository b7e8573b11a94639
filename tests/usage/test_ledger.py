"""The usage ledger counts what the CLIs said once: a resumed session's running total by
its difference, a message once, a killed attempt's messages beside the next total; and
a file a crash cut short loses only its last line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner.providers import claude, codex
from lane_runner.providers.reading import Reading
from lane_runner.providers.usage import UsageReport, tokens
from lane_runner.usage import ledger, spend
from lane_runner.usage.ledger import Attempt, Ledger
from lane_runner.usage.record import Role, line, read

CODEX = codex.ADAPTER
CLAUDE = claude.ADAPTER

PRICES = {"gpt-5": {"input": 1.0, "cached_input": 0.5, "output": 10.0}}


def attempt(n: int, run: int = 1, provider: str = "codex") -> Attempt:
    return Attempt("work", "t1", run, n, provider)


def cumulative(session: str, model: str, cost: float | None = None,
               **counts: int) -> UsageReport:
    costs = {model: cost} if cost is not None else {}
    return UsageReport("cumulative", session, {model: tokens(**counts).tokens}, costs)


def test_a_resumed_codex_thread_is_counted_by_its_difference(tmp_path: Path) -> None:
    book = Ledger(tmp_path)
    book.record(attempt(1), cumulative("th", "gpt-5", input=3000, output=100), PRICES, 1.0)
    book.record(attempt(2, run=2), cumulative("th", "gpt-5", input=5000, output=150), PRICES, 2.0)
    records = Ledger(tmp_path).records("work")  # read back from the file
    assert [r.tokens["input"] for r in records] == [3000, 2000]
    assert [r.tokens["output"] for r in records] == [100, 50]
    assert spend.total(records).cost_usd == pytest.approx((5000 * 1.0 + 150 * 10.0) / 1e6)
    assert {r.cost_source for r in records} == {"prices"}


def test_an_unpriced_model_costs_unknown_never_a_guess(tmp_path: Path) -> None:
    book = Ledger(tmp_path)
    [record] = book.record(attempt(1), cumulative("th", "o9", input=10, output=1), PRICES, 1.0)
    assert record.cost_usd is None and record.cost_source is None
    assert spend.total([record]).to_dict()["cost_complete"] is False
    assert ledger.price("gpt-5", tokens(input=1, cache_write=1).tokens, PRICES) is None


def test_a_new_session_or_a_count_that_began_again_is_counted_whole(tmp_path: Path) -> None:
    book = Ledger(tmp_path)
    book.record(attempt(1), cumulative("a", "gpt-5", input=3000), PRICES, 1.0)
    book.record(attempt(2), cumulative("b", "gpt-5", input=1000), PRICES, 1.0)
    book.record(attempt(3), cumulative("a", "gpt-5", input=500), PRICES, 1.0)
    assert [r.tokens["input"] for r in book.records("work")] == [3000, 1000, 500]


def test_claude_messages_count_once_and_the_result_adds_only_the_rest(tmp_path: Path) -> None:
    """A killed invocation's messages stay counted; the resumed invocation's total (which
    no longer holds them) adds what its own messages did not say: the final output."""
    book = Ledger(tmp_path)
    one = attempt(1, provider="claude")
    first = UsageReport("message", "s", {"m": tokens(input=1000, output=1).tokens}, key="msg_1")
    assert book.record(one, first, {}, 1.0)
    assert book.record(one, first, {}, 1.0) == []  # the same message again (one per block)
    two = attempt(2, run=2, provider="claude")
    book.record(two, UsageReport("message", "s", {"m": tokens(input=2000, output=1).tokens},
                                 key="msg_2"), {}, 2.0)
    book.record(two, cumulative("s", "m", cost=0.00675, input=2000, output=50), {}, 2.0)
    totals = spend.total(book.records("work"))
    assert totals.tokens["input"] == 3000
    assert totals.tokens["output"] == 50  # the killed message's final count was never said
    assert totals.cost_usd == pytest.approx(0.00675) and totals.unpriced == 2


def test_claude_totals_across_resumes_that_ended_well(tmp_path: Path) -> None:
    book = Ledger(tmp_path)
    one, two = attempt(1, provider="claude"), attempt(2, provider="claude")
    book.record(one, cumulative("s", "m", cost=0.0105, input=3000, output=100), {}, 1.0)
    book.record(two, cumulative("s", "m", cost=0.02025, input=6000, output=150), {}, 2.0)
    totals = spend.total(book.records("work"))
    assert (totals.tokens["input"], totals.tokens["output"]) == (6000, 150)
    assert round(totals.cost_usd, 6) == 0.02025


def test_a_line_cut_short_is_skipped_and_the_next_record_starts_afresh(tmp_path: Path) -> None:
    book = Ledger(tmp_path)
    book.record(attempt(1), cumulative("th", "gpt-5", input=10), PRICES, 1.0)
    path = book.path("work")
    with path.open("ab") as handle:
        handle.write(b'{"format": 1, "id": "half')
    again = Ledger(tmp_path)
    assert len(again.records("work")) == 1
    again.record(attempt(2), cumulative("th", "gpt-5", input=30), PRICES, 2.0)
    assert [r.tokens["input"] for r in Ledger(tmp_path).records("work")] == [10, 20]


def test_summaries_by_dimension(tmp_path: Path) -> None:
    book = Ledger(tmp_path)
    book.record(attempt(1), cumulative("th", "gpt-5", input=10), PRICES, 0.0)
    book.record(Attempt("work", "t2", 3, 1, "claude"), cumulative("s", "m", cost=1.0, input=5),
                {}, 86400.0)
    rows = spend.summarize(book.records("work"), ("provider", "day"))
    assert [(r["provider"], r["day"], r["total_tokens"]) for r in rows] == [
        ("claude", "1970-01-02", 5), ("codex", "1970-01-01", 10)]


def test_the_adapters_read_what_the_pinned_clis_print() -> None:
    """Events as codex-cli 0.171.0 and Claude Code 2.1.332 printed them to the scripted
    server (tests/realrun), cut to the fields read."""
    reading = Reading(session_id="th", model="gpt-5")
    CODEX.observe(reading, {"type": "turn.completed", "usage": {
        "input_tokens": 5000, "cached_input_tokens": 1000, "cache_write_input_tokens": 0,
        "output_tokens": 150, "reasoning_output_tokens": 20}})
    [report] = reading.take_usage()
    assert report.basis == "cumulative" and report.session_id == "th"
    assert report.models == {"gpt-5": tokens(input=4000, cached_input=1000, output=150,
                                             reasoning=20).tokens}
    reading = Reading(session_id="s")
    CLAUDE.observe(reading, {"type": "assistant", "session_id": "s", "message": {
        "id": "msg_1", "model": "claude-sonnet-4-5", "content": [],
        "usage": {"input_tokens": 1000, "output_tokens": 1, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0}}})
    CLAUDE.observe(reading, {"type": "result", "subtype": "success", "is_error": False,
                             "session_id": "s", "total_cost_usd": 0.02025,
                             "usage": {"input_tokens": 3000, "output_tokens": 50},
                             "modelUsage": {"claude-sonnet-4-5": {
                                 "inputTokens": 6000, "outputTokens": 150,
                                 "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0,
                                 "costUSD": 0.02025}}})
    message, result = reading.take_usage()
    assert message.basis == "message" and message.key == "msg_1"
    assert result.models["claude-sonnet-4-5"]["input"] == 6000  # modelUsage, not usage
    assert result.cost_usd == {"claude-sonnet-4-5": 0.02025}


#: Lines as the ledger wrote them before its records were typed (format 1): a message,
#: and a cumulative record with what the CLI said, the messages it covers and a kind
#: the CLI gave an impossible number for.
WRITTEN_BEFORE = (
    b'{"format":1,"id":"work/t1/claude/s/msg_1","at":1.0,"day":"1970-01-01","board":"work",'
    b'"task_id":"t1","run_id":1,"attempt":1,"provider":"claude","model":"m","session":"s",'
    b'"basis":"message","tokens":{"input":1000,"cached_input":0,"cache_write":0,"output":1,'
    b'"reasoning":0},"cost_usd":null,"cost_source":null}\n'
    b'{"format":1,"id":"0f3c","at":2.0,"day":"1970-01-01","board":"work","task_id":"t1",'
    b'"run_id":2,"attempt":1,"provider":"claude","model":"m","session":"s",'
    b'"basis":"cumulative","tokens":{"input":1000,"cached_input":0,"cache_write":0,'
    b'"output":49,"reasoning":0},"cost_usd":0.00675,"cost_source":"cli","seen":{"input":2000,'
    b'"cached_input":0,"cache_write":0,"output":50,"reasoning":0,"cost_usd":0.00675},'
    b'"covers":["work/t1/claude/s/msg_1"],"unknown":["cache_write"]}\n'
)


def test_a_ledger_written_before_reads_the_same_and_writes_back_byte_for_byte(
    tmp_path: Path,
) -> None:
    """The typed records keep format 1: every key, in its order, so retention's rewrite
    of an old file changes none of its lines. Mutations: a key renamed, left out
    (``seen``, ``covers``, ``unknown``) or moved in ``Record.to_dict``; ``seen`` read
    without its dollars."""
    path = tmp_path / "work.jsonl"
    path.write_bytes(WRITTEN_BEFORE)
    message, result = read(path)
    assert result.seen is not None and result.seen.cost_usd == 0.00675
    assert result.covers == (message.id,) and result.unknown == ("cache_write",)
    assert message.role is result.role is Role.IMPLEMENT  # written before roles
    assert b"".join(line(record) for record in (message, result)) == WRITTEN_BEFORE
    totals = spend.total([message, result])
    assert totals.unpriced == 0 and totals.tokens["output"] == 50  # the message is covered
