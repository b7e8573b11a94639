"""Files the runner did not create: a FIFO or a link planted at each name it opens.

Each test plants the hostile thing where the daemon will read or write, then shows
the daemon keeps serving (the task is done), nothing is followed (the link's
target is untouched), nothing blocks (the daemon exits by itself), and the bad
entry was moved aside under a name that says what it was.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from lane_runner import config, files
from lane_runner.board.model import NewTask, Status
from tests.harness import BOARD, Lane

TASK = "t-hostile"
PRECIOUS = b"not the runner's\n"


def planted_paths(lane: Lane) -> list[Path]:
    """Every name the daemon opens for this task, in the home and beside the journal."""
    home = lane.home
    lanes = home.lane_dir(BOARD)
    return [
        home.status_file,
        home.root / "node-id",
        home.lock_file,
        home.provider_health / "codex.json",
        home.provider_health / "claude.json",
        lanes / f"{TASK}.json",
        lanes / f"{TASK}.run-1.provider-1.result.json",
        home.log_file(BOARD, TASK),
        marker(lane),
    ]


def marker(lane: Lane) -> Path:
    """Which run works in the worktree, beside it: a directory a worker user may own."""
    worktree = lane.home.worktree(BOARD, TASK)
    return worktree.parent / f".{worktree.name}.run"


def plant(path: Path, kind: str, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        os.symlink(target, path)


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_the_daemon_serves_through_hostile_files_and_moves_them_aside(
    lane: Lane, tmp_path: Path, kind: str
) -> None:
    target = tmp_path / "target"
    target.write_bytes(PRECIOUS)
    target.chmod(0o644)
    paths = planted_paths(lane)
    for path in paths:
        plant(path, kind, target)
    lane.board.add_task(
        NewTask(
            title="t",
            body="do it",
            id=TASK,
            assignee="cli-codex-medium",
            workspace=str(lane.repo),
        )
    )
    daemon = lane.start("--until-idle")
    assert daemon.wait(timeout=180) == 0, (lane.root / "daemon.log").read_text()[-3000:]
    assert lane.board.get_task(TASK).status is Status.DONE
    assert target.read_bytes() == PRECIOUS
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # never re-moded
    for path in paths:
        # Read or appended names were moved aside; status.json and the worktree's
        # marker were renamed over (the link itself replaced, never its target).
        asides = list(path.parent.glob(f"{path.name}.aside-{kind}-*"))
        assert len(asides) == (path not in (lane.home.status_file, marker(lane))), path
        assert not path.is_symlink() and not (path.exists() and stat.S_ISFIFO(path.stat().st_mode))
        if kind == "symlink" and asides:
            assert asides[0].is_symlink()


def test_a_fifo_at_the_config_file_is_moved_aside_and_defaults_apply(tmp_path: Path) -> None:
    plant(tmp_path / "config.toml", "fifo", tmp_path / "target")
    cfg = config.load(tmp_path, environ={})
    assert cfg.sources["concurrency"] == "default"
    assert list(tmp_path.glob("config.toml.aside-fifo-*"))


def test_a_symlinked_state_directory_is_refused_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "codex.json").write_bytes(PRECIOUS)
    home = tmp_path / "home"
    home.mkdir()
    (home / "provider-health").symlink_to(elsewhere)
    with pytest.raises(files.UnsafePath):
        files.read(home / "provider-health" / "codex.json", 1024)
    with pytest.raises(files.UnsafePath):
        files.write(home / "provider-health" / "codex.json", b"{}")
    assert (elsewhere / "codex.json").read_bytes() == PRECIOUS


def test_writes_are_private_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        files.write(tmp_path / "state.json", b"{}")
        files.ensure_directory(tmp_path / "logs" / BOARD)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "state.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "logs").stat().st_mode) == 0o700


def test_a_symlinked_board_journal_is_reported_and_no_run_is_left_running(
    lane: Lane, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    journal_dir = lane.home.lane_dir(BOARD)
    if journal_dir.exists():
        journal_dir.rmdir()
    journal_dir.symlink_to(elsewhere)
    lane.write_config(cooldown_base=120.0, cooldown_max=240.0)  # outlasts the idle check
    task = lane.add("t", body="do it")
    daemon = lane.start("--until-idle")
    assert daemon.wait(timeout=180) == 3  # work left waiting: the run cools down
    log = (lane.root / "daemon.log").read_text()
    assert "Traceback" not in log and "cooling down, not waited for" in log
    back = lane.board.get_task(task.id)
    assert back.status is Status.READY and back.failure_count == 0
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    verify = lane.cli("journal", "verify")
    assert verify.returncode == 1 and f"{journal_dir} is a symlink" in verify.stderr
    assert "Traceback" not in verify.stderr
    shown = orjson.loads(lane.cli("status", "--json").stdout)
    assert shown["unsafe_directories"] == [f"{journal_dir} is a symlink, not a directory"]
    checks = orjson.loads(lane.cli("doctor", "--json").stdout)["checks"]
    assert any(c["name"] == "home directories" and c["level"] == "fail" for c in checks)


def test_a_symlinked_lanes_directory_stops_the_daemon_with_one_line(
    lane: Lane, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    lane.home.lanes.rename(elsewhere)
    lane.home.lanes.symlink_to(elsewhere)
    done = lane.cli("run", "--until-idle")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{lane.home.lanes} is a symbolic link" in done.stderr
    lane.home.lanes.unlink()  # the fixture's teardown needs the home whole again
    elsewhere.rename(lane.home.lanes)


def test_doctor_reports_wider_modes_and_fix_narrows_them(lane: Lane) -> None:
    assert lane.start("--until-idle").wait(timeout=120) == 0  # the home as a daemon leaves it
    assert lane.home.wider_modes(None) == [(lane.home.config_file, 0o644, 0o600)]  # user-written
    os.chmod(lane.home.lanes, 0o755)
    os.chmod(lane.home.root / "node-id", 0o644)
    before = orjson.loads(lane.cli("doctor", "--json").stdout)["checks"]
    (modes,) = [c for c in before if c["name"] == "private modes"]
    assert modes["level"] == "warn" and f"{lane.home.lanes} 0755" in modes["detail"]
    fixed = lane.cli("doctor", "--fix", "--json")
    assert "fixed" in fixed.stderr
    after = orjson.loads(fixed.stdout)["checks"]
    assert [c["level"] for c in after if c["name"] == "private modes"] == ["pass"]
    assert stat.S_IMODE(lane.home.lanes.stat().st_mode) == 0o700
    assert lane.home.wider_modes(None) == []


def test_a_linked_board_file_is_not_served(lane: Lane, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(PRECIOUS)
    (lane.home.boards / "planted.db").symlink_to(target)
    os.mkfifo(lane.home.boards / "piped.db")
    assert lane.store.board_slugs() == [BOARD]
    task = lane.add("t", body="do it")
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert lane.board.get_task(task.id).status is Status.DONE
    assert target.read_bytes() == PRECIOUS
