"""``doctor`` tells the truth: it runs each CLI as the user the attempts run as, so a
setup where every attempt fails says FAIL; the demo's home and a fresh home, after a
run, pass with nothing the runner itself made to warn about."""

from __future__ import annotations

import os
import pwd
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from lane_runner.board.model import NewTask, Status
from lane_runner.board.sqlite import SqliteStore
from lane_runner.cli import doctor
from lane_runner.cli.checks import Level
from lane_runner.home import Home
from tests.harness import BOARD, FAST_CONFIG, Lane, git, toml_value

#: Where the runner's files may legitimately be reported by a machine, not the runner.
MACHINE = {"free disk"}


def _doctor(python: str, home: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-m", "lane_runner.cli.main", "--home", str(home), "doctor", "--json"],
        capture_output=True, text=True, timeout=180, env=env,
    )
    assert done.stdout, done.stderr
    return orjson.loads(done.stdout)  # type: ignore[no-any-return]


def _not_passing(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in report["checks"] if c["level"] != "pass" and c["name"] not in MACHINE]


def test_the_fallback_to_link_and_unlink_is_no_warning() -> None:
    """Link then unlink never replaces a record either: the same guarantee."""
    verdict = doctor.noreplace_verdict
    assert verdict("link+unlink", "written unnamed").level is Level.PASS
    assert verdict("renameat2", "written unnamed").level is Level.PASS


def test_the_demos_home_passes_doctor(tmp_path: Path) -> None:
    """Without IS_SANDBOX in the environment: the demo's home declares its own sandbox."""
    home = tmp_path / "demo"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", "demo", "--simulated", "--keep",
         "--home", str(home)],
        capture_output=True, text=True, timeout=180, env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = _doctor(sys.executable, home, env)
    assert _not_passing(report) == [], report
    assert report["exit_status"] == 0


def test_a_fresh_home_passes_doctor_after_a_run(lane: Lane) -> None:
    """Worktrees, journal and the CLI's result files, as a run leaves them."""
    (lane.root / "config.toml").chmod(0o600)  # the test wrote it; the operator would too
    task = lane.add("one task", assignee="cli-codex-low")  # codex writes a result file
    assert lane.cli("run", "--until-idle").returncode == 0
    assert lane.board.get_task(task.id).status is Status.DONE
    assert list(lane.home.lane_dir(BOARD).glob("*.provider-*.result.json"))
    report = _doctor(sys.executable, lane.root, lane.environ())
    assert _not_passing(report) == [], report


def _user() -> str:
    """The unprivileged user CI creates (``.ci/run``), else one every system has."""
    try:
        pwd.getpwnam("lane-ci")
    except KeyError:
        return "nobody"
    return "lane-ci"


@pytest.fixture
def private_python(tmp_path: Path) -> Path:
    """A virtualenv's python in a directory only root may enter, as a venv under root's
    home is: it runs lane-runner for root, and nobody else can execute it."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    venv = private / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    ours = next(path for path in site.getsitepackages() if path.endswith("site-packages"))
    packages = next(venv.glob("lib/python*/site-packages"))
    (packages / "lane_runner_tests.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return venv / "bin" / "python"


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_doctor_fails_where_every_attempt_fails_as_the_worker_user(
    shared_dir: Path, private_python: Path
) -> None:
    user = _user()
    entry = pwd.getpwnam(user)
    home = Home(shared_dir / "home")
    home.ensure()
    config = {**FAST_CONFIG, "worker_user": user, "concurrency": 1, "failure_limit": 1}
    home.config_file.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in config.items()))
    repo = shared_dir / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README").write_text("x\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "init", cwd=repo)
    for path in (repo, *repo.rglob("*")):
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    store = SqliteStore(home.boards)
    board = store.create_board(BOARD)
    task = board.add_task(NewTask(title="t", body="", assignee="cli-codex-low",
                                  workspace=str(repo)))
    env = {"PATH": os.environ["PATH"], "HOME": str(shared_dir)}
    python = str(private_python)

    report = _doctor(python, home.root, env)
    codex = next(c for c in report["checks"] if c["name"] == "codex CLI")
    assert codex["level"] == "fail", report
    assert "Permission denied" in codex["detail"] and user in codex["detail"], codex
    assert report["exit_status"] == 1

    # What doctor says is what a run meets.
    done = subprocess.run(
        [python, "-m", "lane_runner.cli.main", "--home", str(home.root), "run", "--until-idle"],
        capture_output=True, text=True, timeout=180, env=env,
    )
    assert done.returncode == 4, done.stderr[-3000:]  # a task it ran ended blocked
    ended = board.get_task(task.id)
    store.close()
    assert ended.status is Status.BLOCKED, ended
    assert "exit status 126" in (ended.block_reason or "")
    assert "Permission denied" in (ended.block_reason or ""), ended.block_reason
