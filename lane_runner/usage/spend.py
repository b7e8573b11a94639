"""What was spent: the ledger's records as every reader counts them (docs/ARCHITECTURE.md §3.7).

Every reader of spend (the executor's budgets, the daemon's daily-budget refusal
through ``service/admission.py``, ``status``, ``task show``, ``lane-runner usage``, the
completed event's metadata) counts the board's copy of the ledger merged by id with
this home's own records, so a record both hold counts once and one the home has not
sent yet still counts. ``Spend.of`` is that merge, made here once; its totals are the
only sums of records.

Dollars a record could not price are not in a dollar total (``Totals.unpriced`` says
how many), except a message's whose dollars a CLI's later total holds (``covers``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lane_runner.providers.usage import COUNTED, KINDS
from lane_runner.usage.record import Record, day_of

#: Dimensions ``summarize`` groups by (``lane-runner usage --by``).
DIMENSIONS = ("board", "task", "run", "provider", "model", "day", "role")


@dataclass
class Totals:
    """Spend summed over records: tokens by kind, dollars known, and how many records
    had no known cost (their dollars are missing from ``cost_usd``)."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    cost_usd: float = 0.0
    unpriced: int = 0
    records: int = 0

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens[kind] for kind in COUNTED)

    def add(self, record: Record, covered: frozenset[str] = frozenset()) -> None:
        """Add one record; ``covered``: message ids whose dollars a later total holds."""
        for kind in KINDS:
            self.tokens[kind] += int(record.tokens.get(kind, 0))
        if record.cost_usd is None:
            self.unpriced += record.id not in covered
        else:
            self.cost_usd += record.cost_usd
        self.records += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": dict(self.tokens),
            "total_tokens": self.total_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "cost_complete": self.unpriced == 0,
            "unpriced_records": self.unpriced,
            "records": self.records,
        }


def covered(records: Iterable[Record]) -> frozenset[str]:
    """The message records whose dollars a CLI's later total holds."""
    return frozenset(i for r in records for i in r.covers or ())


def total(records: Iterable[Record]) -> Totals:
    records = list(records)
    held = covered(records)
    totals = Totals()
    for record in records:
        totals.add(record, held)
    return totals


def merged(*copies: Iterable[Record]) -> list[Record]:
    """One ledger from several copies of it (the board's, the home's): the first record
    of each id, so a record both hold is counted once and one only the home holds yet
    (not sent) still counts."""
    seen: set[str] = set()
    records: list[Record] = []
    for copy in copies:
        for record in copy:
            if record.id not in seen:
                seen.add(record.id)
                records.append(record)
    return records


def summarize(records: Iterable[Record], by: Sequence[str]) -> list[dict[str, Any]]:
    """Totals per distinct value of the dimensions ``by`` (``DIMENSIONS``), sorted."""
    records = list(records)
    held = covered(records)
    groups: dict[tuple[Any, ...], Totals] = {}
    for record in records:
        key = tuple(_dimension(record, name) for name in by)
        groups.setdefault(key, Totals()).add(record, held)
    return [
        {**dict(zip(by, key, strict=True)), **totals.to_dict()}
        for key, totals in sorted(groups.items(), key=lambda item: tuple(map(str, item[0])))
    ]


def by_role(records: Iterable[Record]) -> dict[str, dict[str, Any]]:
    """Totals per role the records were spent in (``Record.role``): what implementing
    and reviewing cost apiece (docs/verification.md), only the roles that spent."""
    return {row.pop("role"): row for row in summarize(records, ("role",))}


def _dimension(record: Record, name: str) -> Any:
    if name == "task":
        return record.task_id
    if name == "run":
        return record.run_id
    if name == "role":
        return record.role.value
    return getattr(record, name)


@dataclass(frozen=True)
class Spend:
    """The records a budget or a report counts: a board's copy merged with the home's."""

    records: tuple[Record, ...] = ()

    @classmethod
    def of(cls, on_board: Iterable[Record], at_home: Iterable[Record]) -> Spend:
        """The board's copy (what every runner of it sent) and this home's own records."""
        return cls(tuple(merged(on_board, at_home)))

    def task(self, task_id: str) -> Totals:
        """What a task spent over all its runs and providers."""
        return total(r for r in self.records if r.task_id == task_id)

    def run(self, run_id: int) -> Totals:
        return total(r for r in self.records if r.run_id == run_id)

    def on_day(self, at: float) -> Totals:
        """What was spent on the UTC day of ``at`` (a board's daily budget)."""
        day = day_of(at)
        return total(r for r in self.records if r.day == day)

    def task_usage(self, task_id: str) -> dict[str, Any]:
        """What a task spent: in all, per run, per model and per role (``task show``,
        ``evidence`` and the completed event's metadata all give this)."""
        mine = [r for r in self.records if r.task_id == task_id]
        return {
            **total(mine).to_dict(),
            "by_run": summarize(mine, ("run",)),
            "by_model": summarize(mine, ("provider", "model")),
            "by_role": by_role(mine),
        }
