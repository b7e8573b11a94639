"""The code standards the project holds itself to, checked on every test run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Typed strictly and kept so: the journal above all (its promises are the product's).
STRICT = ["journal", "schemas", "lane_runner/providers", "lane_runner/board"]


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


def test_the_decision_table_decides_every_classification() -> None:
    """decide.py's match over Classification ends in assert_never: a classification
    nobody decided is a type error here (its imports are checked where they live)."""
    done = _run("mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                "lane_runner/run/decide.py")
    assert done.returncode == 0, done.stdout + done.stderr


#: A path that exists only on the machine that wrote it: an absolute path into a
#: temporary, home or work directory, or into a virtualenv's ``bin``.
MACHINE_PATH = re.compile(r"['\"]/(?:tmp|root|home|work|opt)/[^'\"]*(?:venv|/bin/)")


def test_no_test_names_a_path_of_one_machine() -> None:
    """A fresh clone on another machine must pass: tests find programs and files
    relative to the interpreter, the repository or a temporary directory."""
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for folder in ("tests", "bench", ".ci")
        for path in sorted((REPO / folder).rglob("*"))
        if path.is_file() and path.suffix in {".py", ""} and path != Path(__file__)
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]
    assert offenders == []
