"""The campaign's seeded choices: which process dies when, and what each task asks.

A pure function of the seed: the same seed gives the same schedule on every machine
(``random.Random`` is seeded with it alone), so a failing seed names the kills that
found the failure. What the system does between the kills is timing and is not
replayed; a seed makes the same moves, which in practice finds the same class again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

HOMES = 2
MAX_DELAY = 1.5
"""Seconds: each kill comes within 0–1.5 s of its victims being up (cheap kills, many)."""
P_CLI = 0.2
P_BOTH = 0.15
P_DURING_START = 0.1
P_RECOVER_FIRST = 0.35
TASK_WORK = ((0.0, 0), (0.1, 2), (0.1, 5), (0.15, 8))
"""(seconds per event, events) of the simulated CLI's ``slow`` scenario: from no work at
all to about a second, so kills find CLIs starting, working and finishing."""


@dataclass(frozen=True)
class Step:
    """One kill: ``victims`` are the homes whose daemon dies (kill -9); with none, one
    running CLI of home ``cli_of`` dies instead. ``delay`` counts from the victims being
    up (their start's recovery done) or, ``during_start``, from their spawn, so some
    kills land in a start's recovery. ``recover_first`` per victim: the operator runs
    ``lane-runner recover`` before starting it again."""

    delay: float
    victims: tuple[int, ...]
    cli_of: int | None
    during_start: bool
    recover_first: tuple[bool, ...]

    @property
    def kills(self) -> int:
        return len(self.victims) or 1


def schedule(seed: int, kills: int) -> tuple[Step, ...]:
    """Steps whose kills add up to at least ``kills``."""
    chance = random.Random(seed)
    steps: list[Step] = []
    while sum(step.kills for step in steps) < kills:
        roll = chance.random()
        delay = round(chance.uniform(0.0, MAX_DELAY), 3)
        if roll < P_CLI:
            steps.append(Step(delay, (), chance.randrange(HOMES), False, ()))
            continue
        victims = tuple(range(HOMES)) if roll < P_CLI + P_BOTH else (chance.randrange(HOMES),)
        steps.append(Step(
            delay,
            victims,
            None,
            chance.random() < P_DURING_START,
            tuple(chance.random() < P_RECOVER_FIRST for _ in victims),
        ))
    return tuple(steps)


def task_body(seed: int, index: int) -> str:
    """The ``index``-th task's body: its simulated work (a ``[sim:slow:…]`` marker)."""
    pace, events = random.Random(f"{seed}/task/{index}").choice(TASK_WORK)
    return f"[sim:slow:{pace}:{events}]" if events else ""
