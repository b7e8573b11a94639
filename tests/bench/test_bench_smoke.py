"""The benchmark command at toy sizes, end to end, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_every_figure_and_plot(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "BENCHMARKS.md").read_text()
    for title in (
        "Dispatch latency",
        "End-to-end throughput",
        "Journal: fsyncs",
        "Recovery of pending records",
        "Provider output streaming",
        "Idle daemon",
        "Web console: the daemon's CPU",
        "Supervision with",
        "Runners on one PostgreSQL board",
        "Claim latency as the board grows",
        "Runner death",
        "A fleet on one PostgreSQL",
        "A randomized crash campaign on two homes",
        "A large repository (400 files, 2 MB), concurrency 8",
        "Waste under faults: model calls per accepted task, real CLIs",
    ):
        assert f"## {title}" in text
    assert "6 counted, 6 documented" in text  # the fsync count matches the docstring
    assert "CPU per task, ms" in text and "ceiling for any runner with this journal" in text
    assert "| Huey fsync=True |" in text  # Huey at equal durability beside its defaults
    assert "runner's own CPU per task ≤ 2 × the floor's" in text
    assert "| git clone --shared |" in text and "| sparse worktree, one folder |" in text
    plots = sorted(path.name for path in (tmp_path / "bench" / "plots").iterdir())
    assert plots == ["dispatch.png", "recovery.png", "streaming.png", "throughput.png"]
    assert all(
        (tmp_path / "bench" / "plots" / name).read_bytes()[:4] == b"\x89PNG" for name in plots
    )
