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
    pending_times, finalize_times, bare_times = [], [], []
    for index in range(scale.journal_commits):
        start = time.perf_counter()
        durable_write(bare_dir, f"r{index}.json", payload)
        bare_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        journal.write_pending("work", f"t{index}", index + 1, RESULT, "bench", {})
        written = time.perf_counter()
        journal.finalize("work", f"t{index}", index + 1, committed)
        pending_times.append(written - start)
        finalize_times.append(time.perf_counter() - written)
    both_times = [p + f for p, f in zip(pending_times, finalize_times, strict=True)]
    bare = median(bare_times)
    figure = Figure(
        key="journal",
        title="Journal: fsyncs per committed task and commit latency",
        baseline="one bare write + fsync + rename + directory fsync of the same record",
        columns=["operation", "fsyncs", "documented", "p50 latency", "vs baseline"],
        series={"bare": bare_times, "pending": pending_times, "commit": both_times},
    )
    documented_total = sum(DOCUMENTED_FSYNCS.values())
    timed = [
        ("write_pending: accept (result durable)", fsyncs["write_pending"], "write_pending"),
        (
            "finalize: the commit protocol of docs/ARCHITECTURE.md §4.1",
            fsyncs["finalize"],
            "finalize",
        ),
    ]
    figure.rows = [["bare durable write (baseline)", "2", "—", ms(bare), "1.00×"]]
    for (label, counted, key), times in zip(timed, (pending_times, finalize_times), strict=True):
        figure.rows.append(
            [
                label,
                str(counted),
                str(DOCUMENTED_FSYNCS[key]),
                ms(median(times)),
                ratio(median(times), bare),
            ]
        )
    figure.rows.append(
        [
            "accept + commit (write_pending + finalize)",
            str(sum(fsyncs.values())),
            str(documented_total),
            ms(median(both_times)),
            ratio(median(both_times), bare),
        ]
    )
    figure.checks = [
        Check(
            "every fsync justified in journal/__init__.py",
            f"{sum(fsyncs.values())} counted, {documented_total} documented",
            fsyncs == DOCUMENTED_FSYNCS,
        ),
        _within("accept (write_pending)", pending_times, bare),
        _within("commit protocol (finalize, §4.1)", finalize_times, bare),
        Check(
            "accept + commit (no target: three durable documents, 3 × baseline in fsyncs alone)",
            ratio(median(both_times), bare),
            None,
        ),
    ]
    figure.notes.append(
        f"{scale.journal_commits} commits; the board callback answers at once. "
        "docs/ARCHITECTURE.md §4.1 names finalize the commit protocol: prepared evidence, the"
        " board commit, the committed record; that is the commit latency held to 3×. "
        "Accepting the result (write_pending) is the step before it, held to 3× on its own: a"
        " result is safe once write_pending returns. Both together write three durable "
        "documents (6 fsyncs against the baseline's 2), each needed for a guarantee listed in"
        " journal/__init__.py, so their sum is shown without a target. The daemon's fsyncs "
        "per task, lane files included, are in the throughput table; journal/__init__.py "
        "accounts for every one."
    )
    return figure


def _within(what: str, times: list[float], bare: float) -> Check:
    return Check(
        f"{what} ≤ 3 × baseline", ratio(median(times), bare), median(times) <= LATENCY_TARGET * bare
    )


def _split(fs: CountingFS, journal: Journal) -> dict[str, int]:
    """Fsyncs of one commit, call by call (the board directory already exists)."""
    journal.write_pending("work", "warm-up", 1_000_000, RESULT, "bench", {})
    before = fs.fsyncs
    journal.write_pending("work", "split", 1_000_001, RESULT, "bench", {})
    middle = fs.fsyncs
    journal.finalize("work", "split", 1_000_001, committed)
    return {"write_pending": middle - before, "finalize": fs.fsyncs - middle}
