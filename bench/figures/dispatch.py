"""Dispatch latency: task ready on the board → provider process forked.

The "ready" time is when the insert committed; the "started" time is the fork
time the simulated CLI reads from ``/proc/self/stat`` (10 ms resolution), so
interpreter start-up of the simulator is not charged to the runner. Each sample
waits for the previous task to finish, so a slot is always free: this is the
latency of an idle runner noticing work, not of a queue.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from bench.lane import Lane
from bench.result import Check, Figure, median, ms, percentile, ratio
from bench.scale import Scale

P50_TARGET, P99_TARGET = 0.050, 0.250


def exceeds(count: Callable[[], int], threshold: int) -> Callable[[], bool]:
    return lambda: count() > threshold


def sample(lane: Lane, count: int, gap: tuple[float, float]) -> list[float]:
    latencies: list[float] = []
    for index in range(count):
        time.sleep(random.uniform(*gap))
        lane.add(f"dispatch {index}")
        ready_at = time.time()
        lane.wait(exceeds(lambda: len(lane.starts()), index), 120, f"task {index} to start")
        lane.wait(exceeds(lane.done, index), 120, f"task {index} to finish")
        latencies.append(lane.starts()[index]["forked_at"] - ready_at)
    return latencies


def run_lane(root: Path, count: int, poll: float | None, gap: tuple[float, float]) -> list[float]:
    lane = Lane(root)
    try:
        lane.start(poll=poll)
        return sample(lane, count, gap)
    finally:
        lane.stop()


def measure(scale: Scale, workdir: Path) -> Figure:
    runner = run_lane(workdir / "event", scale.dispatch_samples, None, (0.0, 0.1))
    # Inserts land at random phases of the poll cycle, as real submissions do.
    polled = run_lane(
        workdir / "poll", scale.poll_samples, scale.poll_interval, (0.0, scale.poll_interval)
    )
    figure = Figure(
        key="dispatch",
        title="Dispatch latency: task ready → provider process started",
        baseline=f"the same daemon as a poll-every-{scale.poll_interval:g}-s design",
        columns=["design", "samples", "p50", "p99", "max", "p50 vs baseline"],
        series={"lane-runner": runner, f"poll every {scale.poll_interval:g} s": polled},
    )
    for name, values in (
        ("lane-runner", runner),
        (f"poll every {scale.poll_interval:g} s", polled),
    ):
        figure.rows.append(
            [
                name,
                str(len(values)),
                ms(median(values)),
                ms(percentile(values, 99)),
                ms(max(values)),
                ratio(median(values), median(polled)),
            ]
        )
    p50, p99 = median(runner), percentile(runner, 99)
    figure.checks = [
        Check("p50 ≤ 50 ms", ms(p50), p50 <= P50_TARGET),
        Check("p99 ≤ 250 ms", ms(p99), p99 <= P99_TARGET),
    ]
    figure.notes.append(
        "Started = the kernel's fork time of the CLI process (10 ms clock-tick resolution); "
        "ready = the moment the insert committed. With few samples p99 is the maximum."
    )
    return figure
