"""Provider output streaming: JSONL through the supervisor vs ``cat`` to a file.

The supervisor reads the pipe, splits lines, parses each event with the codex
adapter and appends it to the task log (rotating at the default 64 MiB), exactly
as for a real run. The baseline writes the same bytes to a file with ``cat``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench.lane import REPO_ROOT
from bench.result import Check, Figure
from bench.scale import Scale

MB = 1_000_000
MIB = 1 << 20
RATE_TARGET, RSS_TARGET = 100 * MB, 32 * MIB


def write_jsonl(path: Path, size: int) -> int:
    """Codex-shaped ``item.completed`` events of ~1 KiB, ``size`` bytes in all."""
    lines = [
        json.dumps(
            {
                "type": "item.completed",
                "item": {
                    "id": f"item_{n}",
                    "type": "command_execution",
                    "command": "pytest -q",
                    "aggregated_output": f"line {n} " + "." * (700 + n * 37 % 300),
                    "exit_code": 0,
                    "status": "completed",
                },
            }
        ).encode()
        + b"\n"
        for n in range(256)
    ]
    block = b"".join(lines)
    written = 0
    with path.open("wb") as out:
        while written < size:
            out.write(block)
            written += len(block)
    return written


def measure(scale: Scale, workdir: Path) -> Figure:
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "provider-output.jsonl"
    size = write_jsonl(source, scale.stream_bytes)
    subprocess.run(["cat", str(source)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    with (workdir / "cat-copy.jsonl").open("wb") as copy:
        start = time.perf_counter()
        subprocess.run(["cat", str(source)], stdout=copy, check=True)
        cat_seconds = time.perf_counter() - start
    (workdir / "cat-copy.jsonl").unlink()
    child = subprocess.run(
        [sys.executable, "-m", "bench.stream_child", str(source), str(workdir / "task.log")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(child.stdout)
    source.unlink()
    for log in workdir.glob("task.log*"):
        log.unlink()
    rate, cat_rate = size / report["seconds"], size / cat_seconds
    growth = report["peak_rss"] - report["rss_before"]
    figure = Figure(
        key="streaming",
        title=f"Provider output streaming, {size / MIB:,.0f} MiB of JSONL",
        baseline="`cat` of the same bytes to a file",
        columns=["path", "seconds", "MB/s", "vs cat", "peak RSS growth"],
        rows=[
            ["cat > file (baseline)", f"{cat_seconds:.2f}", f"{cat_rate / MB:,.0f}", "1.00×", "—"],
            [
                "supervisor → task log",
                f"{report['seconds']:.2f}",
                f"{rate / MB:,.0f}",
                f"{rate / cat_rate:.2f}×",
                f"{growth / MIB:.1f} MiB",
            ],
        ],
        series={"cat": cat_rate / MB, "supervisor": rate / MB},
    )
    figure.checks = [
        Check("≥ 100 MB/s", f"{rate / MB:,.0f} MB/s", rate >= RATE_TARGET),
        Check("peak RSS growth ≤ 32 MiB", f"{growth / MIB:.1f} MiB", growth <= RSS_TARGET),
    ]
    return figure
