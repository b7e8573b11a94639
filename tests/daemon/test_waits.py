"""How long a run's ending keeps its task waiting, and what the board is told
(``run/waits.py``; pure: no board, no clock)."""

from __future__ import annotations

import pytest

from lane_runner.board.model import BlockKind, Outcome
from lane_runner.providers import Classification
from lane_runner.run import waits
from lane_runner.run.decide import Decision, Step


def test_the_backoff_doubles_with_the_failures_and_is_capped() -> None:
    assert waits.backoff(0, None, 10, 60.0, 600.0) == 60.0
    assert waits.backoff(2, None, 10, 60.0, 600.0) == 240.0
    assert waits.backoff(7, None, 10, 60.0, 600.0) == 600.0


def test_no_backoff_without_a_base_or_for_the_failure_that_gives_up() -> None:
    assert waits.backoff(0, None, 10, 0.0, 600.0) is None
    assert waits.backoff(2, None, 3, 60.0, 600.0) is None  # the third failure of three
    assert waits.backoff(0, 0, 10, 60.0, 600.0) is None  # max_retries 0: the first gives up
    assert waits.backoff(1, 1, 3, 60.0, 600.0) is None  # the task's own limit wins


def test_a_counted_failure_waits_says_so_and_is_filed() -> None:
    decision = Decision(Step.RETRY, "crashed", outcome=Outcome.FAILED, count_failure=True)
    plan = waits.retry(decision, Classification.FAILED, 120.0)
    assert plan == waits.Retry("crashed (next attempt in 120 s)", 120.0, True)


def test_a_run_out_of_time_is_not_filed_against_its_provider() -> None:
    decision = Decision(Step.RETRY, "out of time", outcome=Outcome.TIMED_OUT, count_failure=True)
    assert not waits.retry(decision, Classification.TIMED_OUT, 60.0).filed


def test_an_uncounted_retry_neither_waits_nor_is_filed() -> None:
    decision = Decision(Step.RETRY, "why", outcome=Outcome.FAILED, count_failure=False)
    assert waits.retry(decision, Classification.FAILED, 60.0) == waits.Retry("why", None, False)


def test_a_cooldown_doubles_with_the_cooldowns_in_a_row() -> None:
    cycles = [{"at": 0.0, "cause": "capacity", "reason": "out"}] * 2
    plan = waits.cooldown("capacity", "out", 2, cycles, 5, 30.0, 3600.0)
    assert not plan.block.block and plan.seconds == 60.0
    assert plan.reason == "out (next attempt in 60 s)" and plan.board_reason == "capacity: out"
    assert not plan.tells_next_run


def test_the_cooldown_at_the_limit_blocks_and_a_stall_is_told() -> None:
    cycles = [{"at": 0.0, "cause": "stalled", "reason": "hung"}] * 3
    plan = waits.cooldown("stalled", "hung", 3, cycles, 3, 30.0, 3600.0)
    assert plan.block.block and plan.block.kind is BlockKind.NEEDS_INPUT
    assert plan.tells_next_run


@pytest.mark.parametrize(("until", "seconds"), [(160.0, 60.0), (90.0, 0.0)])
def test_a_park_lasts_until_the_reset(until: float, seconds: float) -> None:
    assert waits.park(until, 100.0) == seconds
