"""When a task that keeps cooling down must stop and be looked at (pure).

Capacity waits, stalls and authentication trouble on every provider are not the
task's fault, so they are not counted failures; but a task must not go round
ready -> cooldown -> ready for days while nobody notices. Each run that ends in a
cooldown adds one cycle to the task's lane state; any other ending clears them.
At ``limit`` consecutive cycles the task is blocked with the history in the
reason: ``transient`` when the last cycle waited for capacity (the accounts are
out; a person may add credit or wait), ``needs_input`` otherwise (a stall or a
login nobody can fix from here).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lane_runner.board.model import BlockKind

#: Causes a cycle is filed under; ``capacity`` alone blocks as ``transient``.
CAPACITY = "capacity"
#: History kept in the lane state: enough to say how it went, never unbounded.
KEPT = 10


@dataclass(frozen=True)
class Verdict:
    block: bool
    kind: BlockKind | None = None
    reason: str = ""


def cycle(cause: str, reason: str, at: float) -> dict[str, Any]:
    """One cooldown, as the lane state keeps it."""
    return {"at": at, "cause": cause, "reason": reason[:500]}


def after_cooldown(count: int, history: Sequence[dict[str, Any]], limit: int) -> Verdict:
    """Whether the ``count``-th consecutive cooldown (``history`` its latest cycles, the
    newest last) ends the cycling with a block, and why."""
    if count < limit or not history:
        return Verdict(False)
    causes = Counter(item["cause"] for item in history)
    mix = ", ".join(f"{n} x {cause}" for cause, n in causes.most_common())
    last = history[-1]
    kind = BlockKind.TRANSIENT if last["cause"] == CAPACITY else BlockKind.NEEDS_INPUT
    reason = (
        f"cooled down {count} times in a row without progress "
        f"(latest {len(history)}: {mix}); last: {last['reason']}"
    )
    return Verdict(True, kind, reason)
