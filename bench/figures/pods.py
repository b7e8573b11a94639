"""Runners on one PostgreSQL board with instant tasks: lane-runner vs procrastinate, same run.

Each runner is a process. A lane-runner runner is ``bench.claimer``: the daemon's
claim path (claim, complete, wait on LISTEN/NOTIFY when idle) with no provider
work, so what is measured is the board. A procrastinate runner is a worker at
concurrency 1 running an instant task. Two phases per runner count:

- **burst**: the tasks are on the board before the runners may start (lane-runner
  runners wait for a go file; procrastinate's jobs wait in a queue nobody
  listens to and are moved into the worked queue with a NOTIFY); claims per
  second from go to the last task finished, as the harness sees it polling
  every 10 ms for both;
- **trickle**: tasks arrive one at a time at random 10-50 ms gaps while the runners
  idle; claim-to-start latency is from the insert's commit to the moment the
  claim returned in a runner (procrastinate: the task function began).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from bench.lane import REPO_ROOT
from bench.postgres import database, unavailable
from bench.result import Check, Figure, median, ms, percentile, ratio
from bench.scale import Scale
from lane_runner.board.model import NewTask
from lane_runner.board.postgres.store import PostgresStore

TARGET = 1.0
POLL = 0.01
BOARD = "pods"


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(POLL)


def _starts(logs: list[Path]) -> dict[str, float]:
    started: dict[str, float] = {}
    for path in logs:
        if path.exists():
            for line in path.read_text().splitlines():
                if line.endswith("}"):
                    entry = json.loads(line)
                    started[entry["title"]] = entry["started"]
    return started


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _trickle(count: int, add: Callable[[str], None]) -> dict[str, float]:
    ready: dict[str, float] = {}
    for index in range(count):
        time.sleep(random.uniform(0.01, 0.05))
        title = f"trickle {index}"
        add(title)
        ready[title] = time.time()
    return ready


def _latencies(ready: dict[str, float], started: dict[str, float]) -> list[float]:
    return [started[title] - at for title, at in ready.items()]


def lane_runner(root: Path, runners: int, burst: int, trickle: int) -> tuple[float, list[float]]:
    root.mkdir(parents=True)
    with database("bench_pods") as url:
        store = PostgresStore(url)
        board = store.create_board(BOARD)
        for index in range(burst):
            board.add_task(NewTask(title=f"burst {index}", body=""))
        go, stop = root / "go", root / "stop"
        logs = [root / f"claimer-{index}.jsonl" for index in range(runners)]
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.claimer", url, BOARD, f"node-{index}",
                 str(log), str(go), str(stop)],
                cwd=REPO_ROOT,
                stderr=(root / f"claimer-{index}.err").open("wb"),
            )
            for index, log in enumerate(logs)
        ]
        try:
            _wait(lambda: all(Path(f"{log}.ready").exists() for log in logs), 60, "claimers")
            started = time.perf_counter()
            go.touch()
            _wait(lambda: board.counts()["done"] == burst, 600, "the burst")
            rate = burst / (time.perf_counter() - started)
            ready = _trickle(trickle, lambda title: board.add_task(NewTask(title=title, body="")))
            _wait(lambda: board.counts()["done"] == burst + trickle, 120, "the trickle")
            latencies = _latencies(ready, _starts(logs))
        finally:
            stop.touch()
            _stop(processes)
            store.close()
    return rate, latencies


def procrastinate(root: Path, runners: int, burst: int, trickle: int) -> tuple[float, list[float]]:
    from procrastinate import SyncPsycopgConnector

    from bench import procrastinate_app

    root.mkdir(parents=True)
    with database("bench_procrastinate") as url:
        logs = [root / f"worker-{index}.jsonl" for index in range(runners)]
        connector = SyncPsycopgConnector(conninfo=url)
        with (
            procrastinate_app.app.replace_connector(connector) as app,
            app.open(),
            psycopg.connect(url, autocommit=True) as connection,
        ):
            app.schema_manager.apply_schema()
            held = app.configure_task("instant", queue="held")
            held.batch_defer(*[{"title": f"burst {index}"} for index in range(burst)])

            def succeeded() -> int:
                row = connection.execute(
                    "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
                ).fetchone()
                return int(row[0]) if row else 0

            processes = [
                subprocess.Popen(
                    [sys.executable, "-m", "bench.procrastinate_app", f"worker-{index}"],
                    cwd=REPO_ROOT,
                    env={
                        **os.environ,
                        "BENCH_PROCRASTINATE_URL": url,
                        "BENCH_PROCRASTINATE_LOG": str(log),
                    },
                    stderr=(root / f"worker-{index}.err").open("wb"),
                )
                for index, log in enumerate(logs)
            ]
            try:
                _wait(
                    lambda: connection.execute(
                        "SELECT count(*) FROM procrastinate_workers"
                    ).fetchone() == (runners,),
                    60,
                    "procrastinate workers",
                )
                time.sleep(0.5)  # registered before listening: let each reach its LISTEN
                started = time.perf_counter()
                with connection.transaction():
                    connection.execute(
                        "UPDATE procrastinate_jobs SET queue_name = 'bench' "
                        "WHERE queue_name = 'held'"
                    )
                    connection.execute(
                        "SELECT pg_notify('procrastinate_queue_v1#bench', "
                        "'{\"type\": \"job_inserted\", \"job_id\": 0}')"
                    )
                _wait(lambda: succeeded() == burst, 600, "the burst")
                rate = burst / (time.perf_counter() - started)
                task = app.configure_task("instant", queue="bench")
                ready = _trickle(trickle, lambda title: task.defer(title=title))
                _wait(lambda: succeeded() == burst + trickle, 120, "the trickle")
                latencies = _latencies(ready, _starts(logs))
            finally:
                _stop(processes)
    return rate, latencies


Sample = tuple[float, list[float]]  # claims/s of the burst; the trickle's latencies


def _rounds(where: Path, runners: int, scale: Scale) -> tuple[Sample, Sample]:
    """Both contenders, ``pod_rounds`` times in turn: the median rate of each, and all its
    latencies. One round alone let the shared machine's swings decide the ratio."""
    rates: dict[str, list[float]] = {"lane": [], "procrastinate": []}
    latencies: dict[str, list[float]] = {"lane": [], "procrastinate": []}
    for round_ in range(scale.pod_rounds):
        for name, contender in (("lane", lane_runner), ("procrastinate", procrastinate)):
            rate, waits = contender(
                where / f"{name}-{round_}", runners, scale.pod_burst, scale.pod_trickle
            )
            rates[name].append(rate)
            latencies[name].extend(waits)
    return (
        (median(rates["lane"]), latencies["lane"]),
        (median(rates["procrastinate"]), latencies["procrastinate"]),
    )


def measure(scale: Scale, workdir: Path) -> Figure:
    figure = Figure(
        key="pods",
        title="Runners on one PostgreSQL board, instant tasks",
        baseline="procrastinate (PostgreSQL, SKIP LOCKED + LISTEN/NOTIFY) doing the same work",
        columns=[
            "runners", "claims/s lane-runner", "procrastinate", "ratio",
            "claim→start p50", "p99", "procrastinate p50", "p99",
        ],
    )
    why_not = unavailable()
    if why_not:
        figure.notes.append(f"Skipped: {why_not}.")
        return figure
    ratios: list[float] = []
    for runners in scale.pod_runners:
        ours, theirs = _rounds(workdir / f"r{runners}", runners, scale)
        ratios.append(ours[0] / theirs[0])
        figure.rows.append([
            str(runners), f"{ours[0]:.0f}", f"{theirs[0]:.0f}", ratio(ours[0], theirs[0]),
            ms(median(ours[1])), ms(percentile(ours[1], 99)),
            ms(median(theirs[1])), ms(percentile(theirs[1], 99)),
        ])
    worst = min(ratios)
    figure.checks = [
        Check("claims/s ≥ 1.0 × procrastinate, every runner count", f"{worst:.2f}×",
              worst >= TARGET),
    ]
    figure.notes.append(
        f"Burst of {scale.pod_burst} tasks, then {scale.pod_trickle} tasks one at a time, per "
        f"runner count and contender; claims/s is the median of {scale.pod_rounds} rounds, the "
        "contenders alternating, and the latencies are every round's together. A lane-runner "
        "runner is the daemon's claim path with no "
        "provider run and no journal (bench/claimer.py): claim, complete, LISTEN/NOTIFY when "
        "idle. A procrastinate runner is one worker process at concurrency 1 with its defaults."
    )
    return figure
