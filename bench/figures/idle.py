"""An idle daemon: 4 boards, 8 slots, nothing to do. CPU % of one core and RSS.

CPU comes from the daemon's own ``utime + stime`` in ``/proc/<pid>/stat`` over
the window (all its threads), so other load on the machine does not count.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.lane import Lane
from bench.result import Check, Figure
from bench.scale import Scale

CPU_TARGET, RSS_TARGET = 1.0, 80 << 20
WARM_UP = 2.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise KeyError("VmRSS")


def measure(scale: Scale, workdir: Path) -> Figure:
    lane = Lane(workdir, boards=("a", "b", "c", "d"), concurrency=8)
    try:
        lane.start()
        assert lane.daemon is not None
        pid = lane.daemon.pid
        time.sleep(WARM_UP)
        cpu_start, wall_start = cpu_seconds(pid), time.monotonic()
        time.sleep(scale.idle_seconds)
        cpu = cpu_seconds(pid) - cpu_start
        wall = time.monotonic() - wall_start
        rss = rss_bytes(pid)
    finally:
        lane.stop()
    percent = cpu / wall * 100
    figure = Figure(
        key="idle",
        title=f"Idle daemon over {scale.idle_seconds:g} s, 4 boards, 8 slots",
        baseline="— (absolute, the daemon's own CPU time)",
        columns=["window", "CPU time", "CPU % of one core", "RSS"],
        rows=[[f"{wall:.1f} s", f"{cpu:.2f} s", f"{percent:.2f} %", f"{rss / (1 << 20):.1f} MiB"]],
    )
    figure.checks = [
        Check("≤ 1 % of one core", f"{percent:.2f} %", percent <= CPU_TARGET),
        Check("RSS ≤ 80 MiB", f"{rss / (1 << 20):.1f} MiB", rss <= RSS_TARGET),
    ]
    figure.notes.append("CPU time has clock-tick (10 ms) resolution.")
    return figure
