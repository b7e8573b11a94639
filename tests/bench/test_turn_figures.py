"""The continuation-turn and verification-overhead figures (issue 46) at toy sizes, end to
end, so they cannot rot (no timing asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_the_turns_and_verify_cost_figures(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--only", "turns", "verify_cost",
         "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "## Continuation turns: prompt tokens per turn" in text
    # each against its baseline from the same run
    assert "| resumed turns told what is new |" in text
    assert "| whole prompt every turn (before) |" in text
    assert "## Checks and review overhead: completed answer → result on the board" in text
    assert "| no checks, no review |" in text and "| check `true` + simulated reviewer |" in text
