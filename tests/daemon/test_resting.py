"""A board that was unavailable rests: uses fail at once until the rest is over."""

from __future__ import annotations

import logging

import pytest

from lane_runner.board.base import BoardUnavailable
from lane_runner.service.resting import Resting


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_unavailable_board_rests_then_is_used_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    resting = Resting(period=5.0, clock=clock)
    used: list[str] = []
    caplog.set_level(logging.WARNING)
    with pytest.raises(BoardUnavailable, match="locked"), resting.use("a"):
        raise BoardUnavailable("board 'a' is unavailable: database is locked")
    for _ in range(3):  # a rest refuses at once, naming why, and logs nothing more
        with pytest.raises(BoardUnavailable, match="rests for 5.0 s more after: .*locked"), \
                resting.use("a"):
            used.append("a")
    with resting.use("b"):  # the other boards are not affected
        used.append("b")
    clock.now += 5.0
    with resting.use("a"):
        used.append("a")
    assert used == ["b", "a"]
    assert len([r for r in caplog.records if "leaving board a alone" in r.getMessage()]) == 1
    assert resting.remaining("a") == 0.0
