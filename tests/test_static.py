"""The code standards the project holds itself to, checked on every test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Typed strictly and kept so: the journal above all (its promises are the product's).
STRICT = ["journal", "schemas", "providers"]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_is_clean_on_the_journal_and_its_neighbours() -> None:
    done = _run("mypy", "--strict", "--no-incremental", *STRICT)
    assert done.returncode == 0, done.stdout + done.stderr
