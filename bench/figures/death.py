"""A runner's death: time from SIGKILL to its runs being back in ready.

Two daemons on one PostgreSQL board, real homes, one shared repository, the
simulated CLIs working slowly so runs are in flight. One daemon and its CLI
processes are SIGKILLed; the survivor's rescue sweep returns the dead node's
runs to ready once their leases expire. Timed from the kill to the moment the
board holds no running run of the dead node (polled every 10 ms).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.lane import REPO_ROOT, make_repo, sim_environ
from bench.postgres import database, unavailable
from bench.result import Check, Figure, median, ratio
from bench.scale import Scale
from lane_runner.board.model import NewTask
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.home import Home
from lane_runner.service.leftovers import find as find_workers

LEASE_TTL, HEARTBEAT = 3.0, 0.5
BOARD = "death"
SLOW = "[sim:slow:0.5:40]"  # twenty seconds of provider work: in flight when killed


def _start(root: Path, url: str) -> tuple[subprocess.Popen[bytes], str]:
    home = Home(root)
    home.ensure()
    settings = {
        "simulate": "true", "concurrency": "2", "board_url": f'"{url}"',
        "lease_ttl": str(LEASE_TTL), "heartbeat_interval": str(HEARTBEAT),
    }
    (root / "config.toml").write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "lane_runner.cli.main", "--home", str(root), "run"],
        env=sim_environ(root, root / "sim-started.jsonl"),
        stdout=(root / "daemon.log").open("ab"),
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
    )
    return daemon, home.node_id()


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _kill_workers(node: str) -> None:
    for pid in find_workers(node):
        with contextlib.suppress(ProcessLookupError):  # it ended by itself meanwhile
            os.kill(pid, signal.SIGKILL)


def one_death(root: Path) -> float:
    repo = make_repo(root / "repo")
    with database("bench_death") as url:
        store = PostgresStore(url)
        board = store.create_board(BOARD)
        survivor, survivor_node = _start(root / "survivor", url)
        doomed, node = _start(root / "doomed", url)
        try:
            for index in range(4):
                board.add_task(NewTask(title=f"slow {index}", body=SLOW, workspace=str(repo)))
            _wait(lambda: len(board.running_runs(node)) >= 1, 120, "the doomed node to claim")
            time.sleep(HEARTBEAT * 1.5)  # its runs are heartbeating
            doomed.send_signal(signal.SIGKILL)
            killed = time.perf_counter()
            _kill_workers(node)
            doomed.wait()
            _wait(lambda: not board.running_runs(node), 60, "the rescue")
            return time.perf_counter() - killed
        finally:
            for daemon in (survivor, doomed):
                if daemon.poll() is None:
                    daemon.send_signal(signal.SIGKILL)
                    daemon.wait()
            _kill_workers(survivor_node)
            store.close()


def measure(scale: Scale, workdir: Path) -> Figure:
    bound = LEASE_TTL + HEARTBEAT
    figure = Figure(
        key="death",
        title="Runner death → its runs back in ready",
        baseline=f"lease TTL + one heartbeat interval ({LEASE_TTL:g} s + {HEARTBEAT:g} s)",
        columns=["deaths", "median", "worst", "worst vs bound"],
    )
    why_not = unavailable()
    if why_not:
        figure.notes.append(f"Skipped: {why_not}.")
        return figure
    seconds = [one_death(workdir / f"death-{index}") for index in range(scale.death_runs)]
    worst = max(seconds)
    figure.rows.append(
        [str(len(seconds)), f"{median(seconds):.2f} s", f"{worst:.2f} s", ratio(worst, bound)]
    )
    figure.checks = [Check(f"≤ lease TTL + heartbeat ({bound:g} s)", f"{worst:.2f} s",
                           worst <= bound)]
    figure.notes.append(
        f"lease_ttl = {LEASE_TTL:g} s, heartbeat_interval = {HEARTBEAT:g} s; the survivor's "
        "rescue sweep runs every heartbeat interval. The daemon and its CLI processes are "
        "SIGKILLed while it runs two slow tasks."
    )
    return figure
