"""Fsyncs per committed task and commit latency, against one bare durable write.

The journal runs on the real filesystem through a ``CountingFS``; the board
commit is a callback that answers "committed" at once, so only the journal's
own cost is timed. Journal and baseline alternate sample by sample, so drift
on a shared machine hits both alike.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.counting import CountingFS
from bench.result import Check, Figure, median, ms, ratio
from bench.scale import Scale
from bench.work import durable_write
from journal import CommitResult, Journal, TerminalRecord

LATENCY_TARGET = 3.0
DOCUMENTED_FSYNCS = {"write_pending": 2, "finalize": 4}  # journal/__init__.py
RESULT = {
    "status": "completed",
    "summary": "bench",
    "changed_files": ["a.py"],
    "tests_run": [],
    "artifacts": [],
    "findings": [],
    "blockers": [],
}


def committed(record: TerminalRecord) -> CommitResult:
    return CommitResult.COMMITTED


def measure(scale: Scale, workdir: Path) -> Figure:
    fs = CountingFS()
    journal = Journal(workdir / "lanes", fs=fs)
    bare_dir = workdir / "bare"
    bare_dir.mkdir(parents=True)
    payload = TerminalRecord("work", "t0", 1, RESULT, "bench", {}).to_bytes()
    fsyncs = _split(fs, journal)  # also creates the board directory before timing
    pending_times, commit_times, bare_times = [], [], []
    for index in range(scale.journal_commits):
        start = time.perf_counter()
        durable_write(bare_dir, f"r{index}.json", payload)
        bare_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        journal.write_pending("work", f"t{index}", index + 1, RESULT, "bench", {})
        written = time.perf_counter()
        journal.finalize("work", f"t{index}", index + 1, committed)
        pending_times.append(written - start)
        commit_times.append(time.perf_counter() - start)
    bare = median(bare_times)
    figure = Figure(
        key="journal",
        title="Journal: fsyncs per committed task and commit latency",
        baseline="one bare write + fsync + rename + directory fsync of the same record",
        columns=["operation", "fsyncs", "documented", "p50 latency", "vs baseline"],
        series={"bare": bare_times, "pending": pending_times, "commit": commit_times},
    )
    total = sum(fsyncs.values())
    figure.rows = [
        ["bare durable write (baseline)", "2", "—", ms(bare), "1.00×"],
        [
            "write_pending (result durable)",
            str(fsyncs["write_pending"]),
            str(DOCUMENTED_FSYNCS["write_pending"]),
            ms(median(pending_times)),
            ratio(median(pending_times), bare),
        ],
        [
            "write_pending + finalize (committed)",
            str(total),
            str(sum(DOCUMENTED_FSYNCS.values())),
            ms(median(commit_times)),
            ratio(median(commit_times), bare),
        ],
    ]
    documented = fsyncs == DOCUMENTED_FSYNCS
    figure.checks = [
        Check(
            "every fsync justified in journal/__init__.py",
            f"{total} counted, {sum(DOCUMENTED_FSYNCS.values())} documented",
            documented,
        ),
        Check(
            "accepted result durable ≤ 3 × baseline",
            ratio(median(pending_times), bare),
            median(pending_times) <= LATENCY_TARGET * bare,
        ),
        Check(
            "fully committed ≤ 3 × baseline",
            ratio(median(commit_times), bare),
            median(commit_times) <= LATENCY_TARGET * bare,
        ),
    ]
    figure.notes.append(
        f"{scale.journal_commits} commits; the board callback answers at once. A result is "
        "safe once write_pending returns (the daemon reports it accepted); finalize then moves "
        "it through prepared evidence to committed with 3 more atomic writes/removals, each "
        "needed for a guarantee listed in journal/__init__.py."
    )
    return figure


def _split(fs: CountingFS, journal: Journal) -> dict[str, int]:
    """Fsyncs of one commit, call by call (the board directory already exists)."""
    journal.write_pending("work", "warm-up", 1_000_000, RESULT, "bench", {})
    before = fs.fsyncs
    journal.write_pending("work", "split", 1_000_001, RESULT, "bench", {})
    middle = fs.fsyncs
    journal.finalize("work", "split", 1_000_001, committed)
    return {"write_pending": middle - before, "finalize": fs.fsyncs - middle}
