"""Recovery of N pending records: time at two sizes, and how it scales (linearity).

Pending records are laid out as a crash would leave them (valid records, never
finalized), then ``Journal.recover`` finalizes every one through the commit
protocol. The board callback answers "committed" at once, so what is timed is
the journal: listing, pinning, validating, prepared evidence, committed record,
retirement.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.figures.journal_cost import RESULT, committed
from bench.result import Check, Figure
from bench.scale import Scale
from journal import Journal, TerminalRecord
from journal import names as journal_names

SECONDS_TARGET = 20.0
LINEARITY_SLACK = 1.2  # 10k/1k ≤ 12: at most 20 % worse than linear


def lay_out(lanes: Path, count: int) -> None:
    board = lanes / "work"
    board.mkdir(parents=True, mode=0o700)
    for index in range(count):
        record = TerminalRecord("work", f"t{index}", index + 1, RESULT, "bench", {})
        (board / journal_names.pending(f"t{index}", index + 1)).write_bytes(record.to_bytes())
    # A crash leaves pending records durable: their writeback is not recovery's work.
    os.sync()


def recover_seconds(root: Path, count: int) -> float:
    lay_out(root / "lanes", count)
    journal = Journal(root / "lanes")
    retries: list[str] = []
    start = time.perf_counter()
    report = journal.recover(committed, lambda board, task, run, reason: retries.append(reason))
    elapsed = time.perf_counter() - start
    left = [entry for entry in journal.entries("work") if entry.kind == "pending"]
    if retries or left:
        raise RuntimeError(f"recovery left {len(left)} pending, {len(retries)} retried: {report}")
    return elapsed


def measure(scale: Scale, workdir: Path) -> Figure:
    small, large = scale.recovery_sizes
    # Untimed: the disk's first journal commits in a run also flush and discard what
    # earlier figures left behind, which would inflate the small size and flatter
    # the ratio.
    recover_seconds(workdir / "warm-up", small)
    small_s = recover_seconds(workdir / "small", small)
    large_s = recover_seconds(workdir / "large", large)
    growth = large_s / small_s
    figure = Figure(
        key="recovery",
        title="Recovery of pending records",
        baseline=f"itself: {large:,} vs {small:,} records (linear would be {large / small:g}×)",
        columns=["pending records", "seconds", "records/s", "ms per record"],
        rows=[
            [f"{n:,}", f"{s:.2f}", f"{n / s:,.0f}", f"{s / n * 1000:.2f}"]
            for n, s in ((small, small_s), (large, large_s))
        ],
        series={"sizes": [small, large], "seconds": [small_s, large_s]},
    )
    limit = LINEARITY_SLACK * large / small
    size_note = "" if large == 10_000 else f" (at {large:,})"
    figure.checks = [
        Check(f"{large:,} in ≤ 20 s{size_note}", f"{large_s:.1f} s", large_s <= SECONDS_TARGET),
        Check(f"{large:,}/{small:,} time ratio ≤ {limit:g}", f"{growth:.1f}", growth <= limit),
    ]
    return figure
