"""Child process for the streaming benchmark: supervise ``cat FILE`` and report.

Runs alone so its peak RSS (``VmHWM``) is the supervisor's, measured from the
resident size right before streaming. Prints one JSON line:
``{"seconds": ..., "rss_before": bytes, "peak_rss": bytes}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lane_runner.providers import codex
from lane_runner.providers.reading import Reading
from lane_runner.providers.supervisor import Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog

CODEX = codex.ADAPTER

LOG_ROTATE_BYTES = 64 << 20  # the configuration default


def status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def main() -> None:
    source, log_path = Path(sys.argv[1]), Path(sys.argv[2])
    reading = Reading()
    task_log = TaskLog(log_path, LOG_ROTATE_BYTES)
    supervisor = Supervisor(
        ["cat", str(source)],
        cwd=source.parent,
        env={"PATH": "/usr/bin:/bin"},
        stdin=b"",
        task_log=task_log,
        limits=Limits(deadline=time.monotonic() + 3600),
        on_event=lambda event: CODEX.observe(reading, event),
        heartbeat=lambda: True,
    )
    rss_before = status_bytes("VmRSS")
    start = time.perf_counter()
    ended = supervisor.run()
    seconds = time.perf_counter() - start
    task_log.close()
    if ended.exit_status != 0:
        raise SystemExit(f"cat ended with {ended}")
    print(
        json.dumps(
            {"seconds": seconds, "rss_before": rss_before, "peak_rss": status_bytes("VmHWM")}
        )
    )


if __name__ == "__main__":
    main()
