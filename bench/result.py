"""What a benchmark hands to the report: a table, the targets it was held to, plot data."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    target: str
    measured: str
    met: bool | None
    """None where the figure has no target, only a number to watch."""


@dataclass
class Figure:
    key: str
    title: str
    baseline: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    series: dict[str, Any] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100): no interpolation between samples."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(values: list[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}×" if baseline > 0 else "n/a"
