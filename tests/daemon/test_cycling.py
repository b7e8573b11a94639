"""When a task that keeps cooling down is blocked (pure)."""

from __future__ import annotations

from lane_runner.board.model import BlockKind
from lane_runner.run.cycling import after_cooldown, cycle


def test_below_the_limit_the_task_keeps_cooling_down() -> None:
    history = [cycle("capacity", "usage limit", float(n)) for n in range(3)]
    assert not after_cooldown(3, history, limit=4).block


def test_at_the_limit_a_capacity_wait_blocks_transient_with_its_history() -> None:
    history = [cycle("stalled", "no event for 900 s", 1.0)] + [
        cycle("capacity", "Credit balance is too low", float(n)) for n in range(2, 5)
    ]
    verdict = after_cooldown(4, history, limit=4)
    assert verdict.block and verdict.kind is BlockKind.TRANSIENT
    assert "4 times in a row" in verdict.reason
    assert "3 x capacity, 1 x stalled" in verdict.reason
    assert verdict.reason.endswith("last: Credit balance is too low")


def test_at_the_limit_stalls_and_logins_need_a_person() -> None:
    history = [cycle("capacity", "429", 1.0), cycle("stalled", "no event for 900 s", 2.0)]
    verdict = after_cooldown(30, history, limit=24)
    assert verdict.block and verdict.kind is BlockKind.NEEDS_INPUT
    assert "30 times" in verdict.reason and "latest 2" in verdict.reason
