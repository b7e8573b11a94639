"""End-to-end throughput: lane-runner vs the floor (a bare loop) vs Huey, same work, same run.

Every contender does, per task: ``git worktree add``, the simulated codex CLI in
its lightest scenario, and keeping the answer. The runner adds claims, leases,
lane state and the crash-safe journal; the floor adds only the same number of
durable writes (write + fsync + rename + directory fsync) as the runner's fsyncs
per task, counted through the journal's FS in this very run; Huey adds its queue
and result store. Rates are tasks per second from the first insert to the last
result.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import schemas
from bench.lane import REPO_ROOT, Lane, make_repo, sim_environ
from bench.result import Check, Figure, median, ratio
from bench.scale import Scale
from bench.work import TaskSpec, durable_write, run_cli_task
from providers.simulators import install

FLOOR_TARGET, HUEY_TARGET = 0.7, 1.0
POLL = 0.01  # how often the harness looks for the last result, for every contender
RECORD = b"{" + b'"x": "' + b"r" * 1800 + b'"}\n'  # the size of a typical terminal record


def runner_rate(root: Path, concurrency: int, tasks: int) -> tuple[float, float]:
    """Tasks per second, and fsyncs per task through the journal's FS."""
    lane = Lane(root, concurrency=concurrency)
    try:
        lane.start()
        lane.add("warm-up")
        lane.wait(lambda: lane.done() == 1, 120, "the warm-up task")
        started = time.perf_counter()
        for index in range(tasks):
            lane.add(f"task {index}")
        lane.wait(lambda: lane.done() == tasks + 1, 600, f"{tasks} tasks", poll=POLL)
        elapsed = time.perf_counter() - started
    finally:
        lane.stop()
    return tasks / elapsed, lane.fsyncs() / (tasks + 1)


class Workbench:
    """A repository, the simulated CLIs and a schema file for the floor and Huey."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = make_repo(root / "repo")
        self.codex = install(root / "bin")["codex"]
        self.schema = root / "worker-result.schema.json"
        self.schema.write_bytes(schemas.load_bytes("worker-result.schema.json"))
        self.env = sim_environ(root, root / "sim-started.jsonl")
        self.out = root / "out"
        self.out.mkdir()

    def spec(self, label: str) -> TaskSpec:
        return TaskSpec(
            repo=str(self.repo),
            worktree=str(self.root / "worktrees" / label),
            branch=f"bench/{label}",
            codex=str(self.codex),
            schema=str(self.schema),
            result_file=str(self.out / f"{label}.result.json"),
            env=self.env,
            prompt=f"# {label}\n\nbench",
        )


def floor_rate(root: Path, concurrency: int, tasks: int, writes: int) -> float:
    bench = Workbench(root)

    def one(index: int) -> None:
        answer = run_cli_task(bench.spec(f"t{index}"))
        assert answer["status"] == "completed"
        for write in range(writes):
            durable_write(bench.out, f"t{index}.{write}.json", RECORD)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(tasks)))
    return tasks / (time.perf_counter() - started)


def huey_rate(root: Path, concurrency: int, tasks: int) -> float:
    """Huey's queue lives in one database per benchmark process (``BENCH_HUEY_DB``)."""
    bench = Workbench(root)
    database = os.environ.setdefault("BENCH_HUEY_DB", str(root.parent / "huey.db"))
    from bench import huey_app

    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "huey.bin.huey_consumer",
            "bench.huey_app.huey",
            "-w",
            str(concurrency),
            "-k",
            "thread",
            "-d",
            "0.01",
            "-m",
            "0.05",
            "-q",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "BENCH_HUEY_DB": database},
        stdout=subprocess.DEVNULL,
        stderr=(root / "huey.log").open("wb"),
    )
    try:
        huey_app.cli_task(bench.spec("warm-up")).get(blocking=True, timeout=120)
        started = time.perf_counter()
        results = [huey_app.cli_task(bench.spec(f"t{index}")) for index in range(tasks)]
        deadline = started + 600
        for result in results:
            # Huey's own blocking get backs off to 1 s between looks: poll like the runner's.
            while (answer := result.get()) is None:
                assert time.perf_counter() < deadline, "Huey did not finish"
                time.sleep(POLL)
            assert answer["status"] == "completed"
        return tasks / (time.perf_counter() - started)
    finally:
        consumer.terminate()
        consumer.wait(30)


def _rounds(
    scale: Scale, workdir: Path, concurrency: int
) -> tuple[dict[str, list[float]], float]:
    """Every contender's rate per round, and the runner's fsyncs per task (first round)."""
    samples: dict[str, list[float]] = {"lane-runner": [], "floor": [], "Huey": []}
    tasks, fsyncs = scale.tasks_per_run, 0.0
    order = list(samples)
    for index in range(scale.throughput_rounds):
        where = workdir / f"round-{index}"
        for name in order[index % 3 :] + order[: index % 3]:
            if name == "lane-runner":
                rate, counted = runner_rate(where / "runner", concurrency, tasks)
                fsyncs = fsyncs or counted
            elif name == "floor":
                # The floor needs the runner's fsync count: in round 0 the runner goes first.
                rate = floor_rate(where / "floor", concurrency, tasks, math.ceil(fsyncs / 2))
            else:
                rate = huey_rate(where / "huey", concurrency, tasks)
            samples[name].append(rate)
    return samples, fsyncs


def measure(scale: Scale, workdir: Path) -> Figure:
    figure = Figure(
        key="throughput",
        title="End-to-end throughput (tasks/s), lightest simulator scenario",
        baseline="the floor: the same worktree, CLI and durable writes in a bare loop; and Huey",
        columns=[
            "concurrency",
            "lane-runner",
            "floor",
            "Huey",
            "vs floor",
            "vs Huey",
            "fsyncs/task",
        ],
    )
    rates: dict[str, list[float]] = {"lane-runner": [], "floor": [], "Huey": []}
    for concurrency in scale.concurrencies:
        samples, fsyncs = _rounds(scale, workdir / f"c{concurrency}", concurrency)
        runner, floor, huey = (median(samples[name]) for name in rates)
        for name, value in (("lane-runner", runner), ("floor", floor), ("Huey", huey)):
            rates[name].append(value)
        figure.rows.append(
            [
                str(concurrency),
                f"{runner:.2f}",
                f"{floor:.2f}",
                f"{huey:.2f}",
                ratio(runner, floor),
                ratio(runner, huey),
                f"{fsyncs:.1f}",
            ]
        )
    top = max(scale.concurrencies)
    figure.series = {"concurrency": list(scale.concurrencies), **rates}
    vs_floor = rates["lane-runner"][-1] / rates["floor"][-1]
    vs_huey = rates["lane-runner"][-1] / rates["Huey"][-1]
    figure.checks = [
        Check(f"≥ 0.7 × floor at concurrency {top}", f"{vs_floor:.2f}×", vs_floor >= FLOOR_TARGET),
        Check(f"≥ 1.0 × Huey at concurrency {top}", f"{vs_huey:.2f}×", vs_huey >= HUEY_TARGET),
    ]
    figure.notes.append(
        f"Median of {scale.throughput_rounds} rounds of {scale.tasks_per_run} tasks per "
        "contender, each after one warm-up task, the contenders in a rotating order; the "
        f"harness looks for the last result every {POLL * 1000:.0f} ms for all. The floor does "
        "⌈fsyncs/2⌉ bare atomic writes per task (the runner's journal fsyncs, counted in the "
        "same run); it does not write a board. Huey runs thread workers with its SQLite storage "
        "at its defaults (WAL, no per-commit fsync) and a 10-50 ms polling delay."
    )
    return figure
