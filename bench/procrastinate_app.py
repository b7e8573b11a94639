"""The procrastinate peer: an instant task on a real PostgreSQL queue (SKIP LOCKED + LISTEN/NOTIFY).

``python -m bench.procrastinate_app WORKER_NAME`` runs one worker (concurrency 1, as
each lane-runner claimer claims one task at a time) on ``BENCH_PROCRASTINATE_URL``;
each job appends the moment it started to ``BENCH_PROCRASTINATE_LOG``.
Procrastinate's defaults are kept (LISTEN/NOTIFY on, finished jobs kept).
"""

from __future__ import annotations

import json
import os
import sys
import time

from procrastinate import App, PsycopgConnector

app = App(connector=PsycopgConnector(conninfo=os.environ.get("BENCH_PROCRASTINATE_URL", "")))


@app.task(name="instant", queue="bench")
def instant(title: str) -> None:
    started = time.time()
    with open(os.environ["BENCH_PROCRASTINATE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"title": title, "started": started}) + "\n")


def main(argv: list[str]) -> int:
    app.run_worker(queues=["bench"], concurrency=1, name=argv[0], delete_jobs="never")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
