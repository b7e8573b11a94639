"""Simulated runners of a fleet, as threads of one process, on the real board API.

``python -m bench.fleet_runner SPEC.json``

Each runner is a thread with its own ``PostgresStore`` (its own pool within its
connection budget, its own listener or poll), holding up to its ``slots`` runs at
once, as a daemon with that many worker slots does, with no CLI: it claims while
a slot is free, heartbeats each run every ``heartbeat`` seconds, completes it
when its random duration is over, and waits on ``wait_for_change`` while it has a
free slot and nothing to claim. Every call is timed; once the STOP file exists
the process writes what it measured to OUT as JSON.
"""

from __future__ import annotations

import collections
import heapq
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lane_runner.board.base import BoardUnavailable
from lane_runner.board.postgres.store import PostgresStore

RESULT = {"status": "completed", "summary": "ok", "changed_files": []}
LEASE_TTL = 1800.0  # the default lease_ttl


class Recorder:
    """Per-call samples: (wall-clock time of the call's end, seconds it took)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.samples: dict[str, list[tuple[float, float]]] = {
            "claim": [], "empty_claim": [], "heartbeat": [], "complete": [], "unavailable": [],
            "refill": [],
        }

    def add(self, kind: str, took: float) -> None:
        with self.lock:
            self.samples[kind].append((time.time(), took))


def runner(spec: dict[str, Any], index: int, recorder: Recorder, go: threading.Event,
           stop: threading.Event) -> None:
    store = PostgresStore(
        spec["url"], connections=spec["connections"], pooled=spec["pooled"],
        wait_budget=spec["heartbeat"] / 2 if spec["heartbeat"] < 4 else 2.0,
    )
    board = store.board(spec["board"])
    node = f"fleet-{spec['first'] + index}"
    due: list[tuple[float, int, float]] = []  # (when, run id, ends at)
    freed: collections.deque[float] = collections.deque()  # when each free slot was freed
    rng = random.Random(spec["first"] + index)
    slots = spec["slots"][index]
    go.wait()
    try:
        while not stop.is_set():
            now = time.monotonic()
            while due and due[0][0] <= now:
                when, run, ends = heapq.heappop(due)
                kind = "complete" if ends <= when else "heartbeat"
                started = time.perf_counter()
                try:
                    if kind == "complete":
                        freed.append(when)
                        board.complete(run, RESULT, "ok")
                    else:
                        board.heartbeat(run, LEASE_TTL)
                        heapq.heappush(due, (min(when + spec["heartbeat"], ends), run, ends))
                except BoardUnavailable:
                    recorder.add("unavailable", time.perf_counter() - started)
                    heapq.heappush(due, (time.monotonic() + 0.5, run, ends))
                    continue
                recorder.add(kind, time.perf_counter() - started)
            empty = False
            while len(due) < slots and not stop.is_set():
                started = time.perf_counter()
                try:
                    claim = board.claim(node, LEASE_TTL, "cli-auto")
                except BoardUnavailable:
                    recorder.add("unavailable", time.perf_counter() - started)
                    break
                took = time.perf_counter() - started
                if claim is None:
                    recorder.add("empty_claim", took)
                    empty = True
                    break
                recorder.add("claim", took)
                now = time.monotonic()
                if freed:  # a run ended, then this one started in its slot
                    recorder.add("refill", now - freed.popleft())
                ends = now + rng.uniform(spec["min_run"], spec["max_run"])
                heapq.heappush(due, (min(now + spec["heartbeat"], ends), claim.run.id, ends))
            wait = (due[0][0] if due else time.monotonic() + 1.0) - time.monotonic()
            if wait <= 0:
                continue
            if empty:
                store.wait_for_change(min(wait, 1.0))
            else:
                stop.wait(min(wait, 1.0))
    finally:
        store.close()


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    recorder = Recorder()
    go, stop = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=runner, args=(spec, index, recorder, go, stop), daemon=True)
        for index in range(spec["count"])
    ]
    for thread in threads:
        thread.start()
    Path(spec["ready"]).touch()
    while not Path(spec["go"]).exists():
        time.sleep(0.05)
    go.set()
    while not Path(spec["stop"]).exists():
        time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join(30)
    Path(spec["out"]).write_text(json.dumps(recorder.samples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
