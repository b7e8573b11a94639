"""Where an accepted result stands on its way to the board, and the only moves between
its stages (docs/delivery.md, docs/ARCHITECTURE.md §6).

The lane state keeps the stage (``delivery.stage`` in ``lanes/<board>/<task>.json``, the
same three words as before there was an enum, so every file an earlier version wrote
still loads). Every change of it goes through ``after``: a move the table does not list
(a followed result accepted again, a result followed that was never journaled) is a
bug, refused with ``IllegalMove`` before the lane state says it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class Stage(StrEnum):
    ACCEPTED = "accepted"  # kept in the lane state; maybe committed, not in the journal yet
    JOURNALED = "journaled"  # its pending record is durable, with what was committed
    FOLLOWED = "followed"  # the board took it; the push and the after_done hook have run


class Move(StrEnum):
    ACCEPT = "accept"  # a run's answer is accepted, or found on the task's branch
    REDELIVER = "redeliver"  # a later run takes an earlier run's accepted result as its own
    JOURNAL = "journal"  # its pending record is written (the commit is made before)
    FOLLOW = "follow"  # the board took it and its follow-ups ended
    CLEAR = "clear"  # another run completed the task with it, or a new run starts after it


#: (stage, move) -> the stage after it; None is "no delivery". Nothing else is legal.
MOVES: Mapping[tuple[Stage | None, Move], Stage | None] = {
    (None, Move.ACCEPT): Stage.ACCEPTED,
    (Stage.ACCEPTED, Move.REDELIVER): Stage.ACCEPTED,
    (Stage.ACCEPTED, Move.JOURNAL): Stage.JOURNALED,
    (Stage.ACCEPTED, Move.CLEAR): None,  # the board completed it through another run
    (Stage.JOURNALED, Move.FOLLOW): Stage.FOLLOWED,
    (Stage.JOURNALED, Move.CLEAR): None,  # a new run: that result reached the journal
    (Stage.FOLLOWED, Move.CLEAR): None,
}


class IllegalMove(ValueError):
    """A move the delivery's stage does not allow: a bug in the caller, never the task's."""


def after(stage: Stage | None, move: Move) -> Stage | None:
    """The stage ``move`` leads to from ``stage``; ``IllegalMove`` when it leads nowhere."""
    try:
        return MOVES[(stage, move)]
    except KeyError:
        raise IllegalMove(f"a delivery {stage or 'not there'} cannot {move.value}") from None


def of(saved: str | None) -> Stage | None:
    """The stage a lane state file says (``None``: it holds no delivery)."""
    return None if saved is None else Stage(saved)
