"""Supervision cost with many unrelated processes on the host vs without.

The supervisor walks only its own worker's tree (``/proc/<pid>/task/*/children``)
and the daemon scans all of ``/proc`` only at start (leftover workers of a killed
daemon). Both are timed with and without N sleeping processes that have nothing
to do with the runner; the "without" runs come before and after, and their mean
is the baseline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.figures.throughput import Workbench
from bench.result import Check, Figure, median, ms, ratio
from bench.scale import Scale
from bench.work import codex_argv
from lane_runner.providers import codex
from lane_runner.providers.reading import Reading
from lane_runner.providers.supervisor import Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog
from lane_runner.service import leftovers

CODEX = codex.ADAPTER

COST_TARGET = 1.2
_SLEEPERS = (
    "import os, signal, sys, time\n"
    "os.setpgrp()\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    if os.fork() == 0:\n"
    "        signal.pause()\n"
    "        os._exit(0)\n"
    "print('ready', flush=True)\n"
    "signal.pause()\n"
)


def supervised_run(bench: Workbench, label: str) -> float:
    spec = bench.spec(label)
    Path(spec["worktree"]).mkdir(parents=True)
    argv = codex_argv(spec)
    reading = Reading()
    task_log = TaskLog(bench.root / f"{label}.log", 64 << 20)
    start = time.perf_counter()
    ended = Supervisor(
        argv,
        cwd=Path(spec["worktree"]),
        env=spec["env"],
        stdin=b"bench",
        task_log=task_log,
        limits=Limits(deadline=time.monotonic() + 600),
        on_event=lambda event: CODEX.observe(reading, event),
        heartbeat=lambda: True,
    ).run()
    elapsed = time.perf_counter() - start
    task_log.close()
    if ended.exit_status != 0:
        raise RuntimeError(f"simulated CLI failed: {ended}")
    return elapsed


def timings(bench: Workbench, label: str, runs: int) -> tuple[list[float], list[float]]:
    runs_s = [supervised_run(bench, f"{label}{n}") for n in range(runs)]
    scans = []
    for _ in range(runs):
        start = time.perf_counter()
        leftovers.find("bench-node-that-has-no-workers")
        scans.append(time.perf_counter() - start)
    return runs_s, scans


def measure(scale: Scale, workdir: Path) -> Figure:
    bench = Workbench(workdir)
    runs = scale.supervised_runs
    before_runs, before_scans = timings(bench, "before", runs)
    sleepers = subprocess.Popen(
        [sys.executable, "-c", _SLEEPERS, str(scale.unrelated_processes)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sleepers.stdout is not None
        sleepers.stdout.readline()
        with_runs, with_scans = timings(bench, "with", runs)
    finally:
        os.killpg(sleepers.pid, signal.SIGKILL)
        sleepers.wait()
    after_runs, after_scans = timings(bench, "after", runs)
    base_run = (median(before_runs) + median(after_runs)) / 2
    base_scan = (median(before_scans) + median(after_scans)) / 2
    n = scale.unrelated_processes
    figure = Figure(
        key="supervision",
        title=f"Supervision with {n:,} unrelated processes on the host",
        baseline="the same, without them (mean of runs before and after)",
        columns=["operation", "without (p50)", f"with {n:,} (p50)", "ratio"],
        rows=[
            [
                "supervised CLI run (spawn → reaped)",
                ms(base_run),
                ms(median(with_runs)),
                ratio(median(with_runs), base_run),
            ],
            [
                "leftover scan of /proc (daemon start only)",
                ms(base_scan),
                ms(median(with_scans)),
                ratio(median(with_scans), base_scan),
            ],
        ],
    )
    cost = median(with_runs) / base_run
    figure.checks = [Check("supervised run ≤ 1.2 ×", f"{cost:.2f}×", cost <= COST_TARGET)]
    figure.notes.append(f"{runs} supervised runs of the simulated codex per condition.")
    return figure
