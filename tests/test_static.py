"""The code standards the project holds itself to, checked on every test run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from lane_runner.providers.registry import NAMES

REPO = Path(__file__).resolve().parents[1]
#: Typed strictly and kept so: the journal above all (its promises are the product's),
#: and all of the runner (issue 29).
STRICT = ["journal", "schemas", "lane_runner"]


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


def provider_names_outside_adapters(root: Path = REPO / "lane_runner") -> list[str]:
    """Every line outside ``lane_runner/providers/`` holding a provider's name as a string
    literal (``"codex"``, ``'claude'``): a comparison, a table key or a default that
    belongs in that provider's adapter. Words in prose and f-strings are not literals of
    a name and do not count."""
    quoted = re.compile(rf"""(['"])(?:{"|".join(map(re.escape, NAMES))})\1""")
    return [
        f"{path.relative_to(root.parent)}:{number}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if root / "providers" not in path.parents  # each CLI's adapter, and the registry
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if quoted.search(line)
    ]


def test_no_provider_name_is_compared_outside_its_adapter() -> None:
    """Executor, preview, services, doctor, config and router iterate the registry
    (``lane_runner/providers/registry.py``) and never name a provider themselves."""
    assert provider_names_outside_adapters() == []
