"""The Huey peer: one task doing the same work as a lane-runner run, on Huey's SQLite storage.

The consumer runs ``huey_consumer bench.huey_app.huey``; the database file comes
from ``BENCH_HUEY_DB`` so producer and consumer share it. ``BENCH_HUEY_FSYNC=1``
gives Huey ``fsync=True`` (``PRAGMA synchronous=FULL`` on every connection, the
runner's durability); unset, Huey's defaults are kept (its SQLite storage in WAL
mode, ``synchronous`` left to the SQLite build: FULL in Debian's, so on this
machine the two differ only in Huey setting it). The return value is stored as
the task's result, which is how Huey keeps results.
"""

from __future__ import annotations

import os
from typing import Any

from huey import SqliteHuey  # type: ignore[import-untyped]

from bench.work import TaskSpec, run_cli_task

huey = SqliteHuey(
    "bench",
    filename=os.environ.get("BENCH_HUEY_DB", "huey-bench.db"),
    fsync=True if os.environ.get("BENCH_HUEY_FSYNC") == "1" else None,
)


@huey.task()  # type: ignore[untyped-decorator]
def cli_task(spec: TaskSpec) -> dict[str, Any]:
    return run_cli_task(spec)
