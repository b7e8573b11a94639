"""A CLI path that cannot work (missing, not executable, another program) is refused
up front with the reason, exit 2, and the home is left as it was (``run``'s not made)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _bad(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"codex-{kind}"
    if kind == "missing":
        return path
    if kind == "not-executable":
        path.write_text("#!/bin/sh\necho codex-cli 0.171.0\n")
        path.chmod(0o644)  # no x bit at all: not even root may run it
        return path
    path.write_text("#!/bin/sh\necho 'hello, I am not codex'\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("kind", ["missing", "not-executable", "wrong-program"])
@pytest.mark.parametrize("command", [["run", "--until-idle"], ["recover"]])
def test_a_bad_codex_bin_is_refused_and_changes_nothing(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    home = tmp_path / "home"
    codex = _bad(tmp_path, kind)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANE_RUNNER_CODEX_BIN": str(codex)}

    def lane_runner(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lane_runner.cli.main", "--home", str(home), *args],
            env=env, capture_output=True, text=True, timeout=120,
        )

    if command == ["recover"]:  # recover needs a home (a missing one is refused first)
        assert lane_runner("board", "create", "main").returncode == 0
    before = sorted(home.rglob("*")) if home.exists() else None
    done = lane_runner(*command)
    assert done.returncode == 2, done.stderr
    expected = ("is not the codex CLI: its --version said 'hello, I am not codex'"
                if kind == "wrong-program" else "is missing or not executable")
    assert f"codex_bin '{codex}' {expected}; fix it or unset it" in done.stderr
    assert "Traceback" not in done.stderr
    assert (sorted(home.rglob("*")) if home.exists() else None) == before
