"""What a CLI said about the tokens and money an attempt spent, and about its usage limits.

Each adapter turns its CLI's own events into these two records; everything after
(attributing the spend to an attempt, the ledger, budgets, provider health) reads
only them, never a CLI's event shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: Token kinds the ledger keeps, none a part of another except ``reasoning``, which is
#: the part of ``output`` a model spent thinking (kept for display, never added twice).
KINDS = ("input", "cached_input", "cache_write", "output", "reasoning")
#: Kinds whose sum is the tokens an attempt processed (``--max-tokens`` counts these).
COUNTED = ("input", "cached_input", "cache_write", "output")

Basis = Literal["message", "cumulative"]

#: The largest token count taken as said: integers above it lose precision as JSON
#: numbers (a CLI's JSON parser reads 2**70 as a float) and no session spends it.
MAX_TOKENS = 2**53


@dataclass(frozen=True)
class UsageReport:
    """One usage figure of a CLI.

    ``basis`` says how it adds up. ``message``: one model response, reported once
    (claude's assistant messages, whose output count is not final). ``cumulative``:
    the session's running total so far, per model (codex's ``turn.completed`` over
    its thread, claude's ``result`` ``modelUsage`` and ``total_cost_usd`` across a
    resume): the ledger takes the difference from what it already holds.
    """

    basis: Basis
    session_id: str | None
    models: dict[str, dict[str, int]]
    """Tokens by kind (``KINDS``), per model."""
    cost_usd: dict[str, float] = field(default_factory=dict)
    """The CLI's own dollar figure per model, where it gives one (claude)."""
    key: str = ""
    """A message report's identity (the API message id): never counted twice."""
    unknown: tuple[str, ...] = ()
    """Kinds the CLI gave an impossible number for (``Counted.unknown``): counted 0,
    recorded as unknown, and said in the run's comments."""


@dataclass(frozen=True)
class LimitNotice:
    """A usage limit the CLI reported, and when it says the limit resets (None: unsaid)."""

    words: str
    resets_at: float | None


@dataclass(frozen=True)
class Counted:
    """Token counts by kind as a CLI gave them, and the kinds whose number was impossible."""

    tokens: dict[str, int]
    unknown: tuple[str, ...] = ()


def tokens(**counts: object) -> Counted:
    """Token counts by kind, each a non-negative integer up to ``MAX_TOKENS``. A kind not
    given counts 0; a number that cannot be a count (negative, not an integer, above
    ``MAX_TOKENS``) counts 0 too, and is named in ``unknown``: the spend is not known,
    which the run says, rather than taken as none."""
    found: dict[str, int] = {}
    unknown: list[str] = []
    for kind in KINDS:
        value = counts.get(kind)
        if value is None:
            found[kind] = 0
        elif isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
            found[kind] = value
        else:
            found[kind] = 0
            unknown.append(kind)
    return Counted(found, tuple(unknown))
