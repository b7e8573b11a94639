"""The procrastinate peer of the fleet figure: workers holding many jobs of some seconds each.

``python -m bench.procrastinate_fleet WORKER_NAME CONCURRENCY OUT STOP``

One worker process at CONCURRENCY runs ``fleet`` jobs that sleep for their
duration, as a lane-runner runner holds runs for theirs; procrastinate's defaults
otherwise (LISTEN/NOTIFY, finished jobs kept). Each job start is timed, and so is
the gap from a job's end to the start of the next one in the slot it freed (the
peer of a lane-runner runner's completion and next claim). Once STOP exists the
samples go to OUT as JSON.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from procrastinate import App, PsycopgConnector

app = App(connector=PsycopgConnector(conninfo=os.environ.get("BENCH_PROCRASTINATE_URL", "")))
STARTS: list[float] = []
REFILLS: list[tuple[float, float]] = []
FREED: collections.deque[float] = collections.deque()


@app.task(name="fleet", queue="fleet")
async def fleet(duration: float) -> None:
    now = time.monotonic()
    STARTS.append(time.time())
    if FREED:
        REFILLS.append((time.time(), now - FREED.popleft()))
    try:
        await asyncio.sleep(duration)
    finally:
        FREED.append(time.monotonic())


async def _run(name: str, concurrency: int, stop: Path) -> None:
    async with app.open_async():
        worker = asyncio.create_task(
            app.run_worker_async(
                queues=["fleet"], concurrency=concurrency, name=name, delete_jobs="never",
                install_signal_handlers=False,
            )
        )
        while not stop.exists():
            await asyncio.sleep(0.2)
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker


def main(argv: list[str]) -> int:
    name, concurrency, out, stop = argv
    asyncio.run(_run(name, int(concurrency), Path(stop)))
    Path(out).write_text(json.dumps({"starts": STARTS, "refill": REFILLS}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
