"""A fleet on one PostgreSQL: many runners holding many runs, with and without PgBouncer,
against procrastinate holding as many jobs, in the same run.

A lane-runner runner is a thread of ``bench.fleet_runner`` with its own store (its
own pool and listener, within ``board_connections``), holding up to ``slots`` runs
of random 20-60 s (scaled down in the smoke run), heartbeating each at the default
``heartbeat_interval`` and completing it when its time is over; the board holds a
backlog, so a freed slot is claimed again at once. Three setups, one after the
other, each on a fresh database:

- **through PgBouncer** (transaction mode, 20 server connections): every runner,
  a budget of one connection, wake-ups by the bounded poll;
- **direct**: as many runners as the server's ``max_connections`` lets hold their
  default budget of 3 (one LISTEN, a pool of two), the same runs in total;
- **procrastinate**: worker processes at a concurrency that holds the same number
  of jobs, each sleeping for the same random durations.

After a warm-up the window is measured: runs started per second, the latency of
the claim call (lane-runner) and the gap from a run's end to the next start in the
slot it freed (both), heartbeat call latency, CPU of the PostgreSQL backends
serving the benchmark's database per 1,000 runs started, and the most server
connections held at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench import pgbouncer
from bench.lane import REPO_ROOT
from bench.postgres import ADMIN_URL, database, unavailable
from bench.result import Check, Figure, median, ms, percentile
from bench.scale import Scale
from lane_runner.board.model import NewTask
from lane_runner.board.postgres.store import PostgresStore

BOARD = "fleet"
HEARTBEAT = 20.0  # the default heartbeat_interval
HEARTBEAT_TARGET = 0.100  # seconds, p99 at the fleet's size
DIRECT_BUDGET = 3  # the default board_connections
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Measured:
    setup: str
    runners: int
    runs: int
    budget: str
    started: int  # runs started in the window
    window: float
    claim: list[float]
    refill: list[float]
    heartbeat: list[float]
    cpu: float  # seconds of the database's backends in the window
    connections: int  # most server connections held at once

    @property
    def rate(self) -> float:
        return self.started / self.window


def _backend_cpu(observer: psycopg.Connection[Any], name: str) -> dict[int, float]:
    """CPU seconds so far of each backend serving the database ``name``, by pid."""
    pids = [
        row[0]
        for row in observer.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
    ]
    seconds: dict[int, float] = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:  # the backend ended meanwhile; its CPU is lost to both samples
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    return seconds


def _connections(observer: psycopg.Connection[Any], name: str) -> int:
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        (name,),
    ).fetchone()
    return int(row[0]) if row else 0


def _window(url: str, warmup: float, window: float) -> tuple[float, float, float, int]:
    """Wait out the warm-up, then sample the window: (start, end, backend CPU, connections).

    One observing connection for the whole window: a fresh one per sample would count the
    previous one's backend while it is still exiting.
    """
    name = url.rpartition("/")[2]
    time.sleep(warmup)
    with psycopg.connect(url, autocommit=True) as observer:
        before = _backend_cpu(observer, name)
        start = time.time()
        most = 0
        while time.time() - start < window:
            most = max(most, _connections(observer, name))
            time.sleep(1.0)
        after = _backend_cpu(observer, name)
        end = time.time()
    cpu = sum(after[pid] - before[pid] for pid in after if pid in before)
    return start, end, cpu, most


def _in(samples: list[list[float]], start: float, end: float) -> list[float]:
    return [took for at, took in samples if start <= at <= end]


def lane_runner(
    root: Path, scale: Scale, runners: int, runs: int, budget: int, bouncer: int | None
) -> Measured:
    """``runners`` holding ``runs`` between them (some one more than others)."""
    root.mkdir(parents=True)
    processes = min(scale.fleet_processes, runners)
    with database("bench_fleet") as url:
        store = PostgresStore(url)
        board = store.create_board(BOARD)
        for index in range(scale.fleet_tasks):
            board.add_task(NewTask(title=f"fleet {index}", body="", assignee="cli-auto"))
        store.close()
        go, stop = root / "go", root / "stop"
        specs: list[dict[str, Any]] = []
        first = 0
        for number in range(processes):
            count = runners // processes + (number < runners % processes)
            spec = {
                "url": url if bouncer is None else pgbouncer.through(url, bouncer),
                "pooled": bouncer is not None, "connections": budget, "board": BOARD,
                "first": first, "count": count, "heartbeat": scale.fleet_heartbeat,
                "slots": [runs // runners + (first + n < runs % runners) for n in range(count)],
                "min_run": scale.fleet_run[0], "max_run": scale.fleet_run[1],
                "ready": str(root / f"{number}.ready"), "go": str(go), "stop": str(stop),
                "out": str(root / f"{number}.json"),
            }
            first += count
            (root / f"{number}.spec.json").write_text(json.dumps(spec))
            specs.append(spec)
        children = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.fleet_runner", str(root / f"{n}.spec.json")],
                cwd=REPO_ROOT, stderr=(root / f"{n}.err").open("wb"),
            )
            for n in range(processes)
        ]
        try:
            _wait_for(lambda: all(Path(s["ready"]).exists() for s in specs), children, 120)
            go.touch()
            start, end, cpu, most = _window(url, scale.fleet_warmup, scale.fleet_window)
        finally:
            stop.touch()
            for child in children:
                child.wait(120)
        samples: dict[str, list[list[float]]] = {}
        for spec in specs:
            for kind, values in json.loads(Path(spec["out"]).read_text()).items():
                samples.setdefault(kind, []).extend(values)
    claims = _in(samples["claim"], start, end)
    return Measured(
        setup="lane-runner" + (" through PgBouncer" if bouncer is not None else ", direct"),
        runners=runners, runs=runs,
        budget=f"{budget} per runner" + (" (pooler)" if bouncer is not None else ""),
        started=len(claims), window=end - start, claim=claims,
        refill=_in(samples["refill"], start, end),
        heartbeat=_in(samples["heartbeat"], start, end), cpu=cpu, connections=most,
    )


def _wait_for(condition: Any, children: list[subprocess.Popen[bytes]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if any(child.poll() is not None for child in children):
            raise RuntimeError("a fleet process exited early; see its .err file")
        if time.monotonic() > deadline:
            raise TimeoutError("fleet processes did not get ready")
        time.sleep(0.1)


def procrastinate(root: Path, scale: Scale, runs: int) -> Measured:
    import random

    from procrastinate import SyncPsycopgConnector

    from bench import procrastinate_fleet

    root.mkdir(parents=True)
    workers = scale.fleet_processes
    rng = random.Random(0)
    with database("bench_procrastinate_fleet") as url:
        connector = SyncPsycopgConnector(conninfo=url)
        with procrastinate_fleet.app.replace_connector(connector) as app, app.open():
            app.schema_manager.apply_schema()
            held = app.configure_task("fleet", queue="held")
            held.batch_defer(*[
                {"duration": rng.uniform(*scale.fleet_run)} for _ in range(scale.fleet_tasks)
            ])
        stop = root / "stop"
        outs = [root / f"worker-{n}.json" for n in range(workers)]
        children = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.procrastinate_fleet", f"worker-{n}",
                 str(runs // workers + (n < runs % workers)), str(outs[n]), str(stop)],
                cwd=REPO_ROOT, env={**os.environ, "BENCH_PROCRASTINATE_URL": url},
                stderr=(root / f"worker-{n}.err").open("wb"),
            )
            for n in range(workers)
        ]
        try:
            with psycopg.connect(url, autocommit=True) as connection:
                _wait_for(
                    lambda: connection.execute(
                        "SELECT count(*) FROM procrastinate_workers"
                    ).fetchone() == (workers,),
                    children, 120,
                )
                time.sleep(0.5)  # registered before listening: let each reach its LISTEN
                with connection.transaction():
                    connection.execute(
                        "UPDATE procrastinate_jobs SET queue_name = 'fleet' "
                        "WHERE queue_name = 'held'"
                    )
                    connection.execute(
                        "SELECT pg_notify('procrastinate_queue_v1#fleet', "
                        "'{\"type\": \"job_inserted\", \"job_id\": 0}')"
                    )
            start, end, cpu, most = _window(url, scale.fleet_warmup, scale.fleet_window)
        finally:
            stop.touch()
            for child in children:
                child.wait(120)
        starts: list[float] = []
        refill: list[list[float]] = []
        for out in outs:
            measured = json.loads(out.read_text())
            starts += measured["starts"]
            refill += measured["refill"]
    return Measured(
        setup="procrastinate", runners=workers, runs=runs,
        budget="its defaults", started=sum(1 for at in starts if start <= at <= end),
        window=end - start, claim=[], refill=_in(refill, start, end), heartbeat=[],
        cpu=cpu, connections=most,
    )


def _max_connections() -> int:
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        row = admin.execute(
            "SELECT current_setting('max_connections')::int "
            "- current_setting('superuser_reserved_connections')::int"
        ).fetchone()
    return int(row[0]) if row else 100


def _row(measured: Measured, baseline: Measured) -> list[str]:
    def p(values: list[float], q: float) -> str:
        return ms(percentile(values, q)) if values else "—"

    per_thousand = measured.cpu / measured.started * 1000 if measured.started else 0.0
    return [
        measured.setup, str(measured.runners), str(measured.runs), measured.budget,
        f"{measured.rate:.1f}", f"{measured.rate / baseline.rate:.2f}×" if baseline.rate else "n/a",
        ms(median(measured.claim)) if measured.claim else "—", p(measured.claim, 99),
        ms(median(measured.refill)) if measured.refill else "—", p(measured.refill, 99),
        p(measured.heartbeat, 99), f"{per_thousand:.2f} s ({measured.cpu:.1f} s)",
        str(measured.connections),
    ]


def measure(scale: Scale, workdir: Path) -> Figure:
    figure = Figure(
        key="fleet",
        title="A fleet on one PostgreSQL",
        baseline="procrastinate holding as many jobs of the same durations, in the same run",
        columns=[
            "setup", "runners", "runs held", "connections budget", "runs started/s",
            "vs procrastinate", "claim p50", "p99", "slot refill p50", "p99",
            "heartbeat p99", "PostgreSQL CPU / 1,000 runs (in the window)",
            "server connections (max)",
        ],
    )
    why_not = unavailable() or pgbouncer.missing()
    if why_not:
        figure.notes.append(f"Skipped: {why_not}.")
        return figure
    runs = scale.fleet_runners * scale.fleet_slots
    direct_runners = max(1, min(scale.fleet_runners, (_max_connections() - 10) // DIRECT_BUDGET))
    with pgbouncer.running(workdir / "pgbouncer", ADMIN_URL) as port:
        pooled = lane_runner(workdir / "pooled", scale, scale.fleet_runners, runs, 1, port)
    direct = lane_runner(workdir / "direct", scale, direct_runners, runs, DIRECT_BUDGET, None)
    theirs = procrastinate(workdir / "procrastinate", scale, runs)
    for measured in (pooled, direct, theirs):
        figure.rows.append(_row(measured, theirs))
    worst_rate = min(pooled.rate, direct.rate) / theirs.rate if theirs.rate else 0.0
    heartbeat = max(percentile(m.heartbeat, 99) for m in (pooled, direct) if m.heartbeat)
    figure.checks = [
        # Both keep every slot full once warm, so the rate is the runs held over their mean
        # length: a number to watch (a fleet that cannot keep up falls below), no target.
        Check(f"runs started/s vs procrastinate, {runs} runs held", f"{worst_rate:.2f}×", None),
        Check(f"heartbeat p99 < 100 ms, {runs} runs", ms(heartbeat),
              heartbeat < HEARTBEAT_TARGET),
        Check(
            "server connections within budget",
            f"{direct.connections} ≤ {direct_runners * DIRECT_BUDGET} direct, "
            f"{pooled.connections} ≤ {pgbouncer.SERVER_POOL} through PgBouncer",
            direct.connections <= direct_runners * DIRECT_BUDGET
            and pooled.connections <= pgbouncer.SERVER_POOL,
        ),
    ]
    figure.notes.append(
        f"Runs of {scale.fleet_run[0]:g}-{scale.fleet_run[1]:g} s, heartbeats every "
        f"{scale.fleet_heartbeat:g} s, a backlog of {scale.fleet_tasks} tasks; "
        f"{scale.fleet_warmup:g} s warm-up, then a {scale.fleet_window:g} s window. Runners are "
        f"threads in {scale.fleet_processes} processes, each with its own store; procrastinate "
        f"is {scale.fleet_processes} worker processes at concurrency "
        f"{runs // scale.fleet_processes}. "
        "Direct, the server's max_connections bounds the runners to "
        f"{direct_runners} at the default budget of {DIRECT_BUDGET}; through PgBouncer (20 server "
        "connections, transaction mode) each runner has a budget of 1 and polls every second. "
        "Claim = the claim call; slot refill = from a run's end to the next run started in its "
        "slot (a lane-runner completion and claim; procrastinate's job end to the next job's "
        "start). PostgreSQL CPU counts the backends serving the benchmark's database."
    )
    return figure
