"""The README's quick start: the demo runs to the end and shows what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_demo_finishes_every_task_through_a_crash_and_a_recovery(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", "demo", "--simulated", "--home", str(home)],
        capture_output=True, text=True, timeout=120,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "kill -9 of the daemon" in out and "$ lane-runner recover" in out
    table = out.split("\nTASK ", 1)[1].split("journal directory", 1)[0]
    rows = [line.split() for line in table.strip().splitlines()[1:]]
    assert [row[1] for row in rows] == ["done"] * 8
    assert "static-fallback" in out  # the capacity fallback happened
    goal = next(row for row in rows if row[0] == "goal")
    assert goal[-2:] == ["turn", "2"]  # the goal-mode continuation: accepted on the second turn
    assert ".terminal.committed.json" in out
    assert not home.exists() and "--keep keeps it" in out  # no folder left behind


def test_the_demo_empties_a_directory_it_was_given_and_keeps_the_directory(
    tmp_path: Path,
) -> None:
    home = tmp_path / "given"
    home.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", "demo", "--simulated", "--json",
         "--home", str(home)],
        capture_output=True, text=True, timeout=120,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert home.is_dir() and list(home.iterdir()) == []


def test_the_demo_refuses_a_home_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    result = subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", "demo", "--home", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1 and "not empty" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_a_machine_without_git_gets_one_line_saying_so(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH that holds this Python and no git
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    result = subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", "demo", "--simulated",
         "--home", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=60,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
    )
    assert result.returncode == 1, result.stderr
    assert "install git" in result.stderr and "Traceback" not in result.stderr
