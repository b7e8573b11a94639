"""The claim guards of issue 32 with a real daemon: a full disk holds claims; graded
memory pressure and the slots derived from memory; ``release_on_stop`` hands work back."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane_runner.board.model import Outcome, Status
from lane_runner.service import disk, memory, sizing
from lane_runner.service.leftovers import find as find_workers
from tests.harness import Lane

MIB = 1 << 20


def json_of(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs: a filesystem the test can fill (root only)."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.fixture
def lane_on_small_disk(small_disk: Path) -> Iterator[Lane]:
    harness = Lane(small_disk / "home")
    yield harness
    harness.stop_all()
    for pid in find_workers(harness.node()):
        os.kill(pid, signal.SIGKILL)
    harness.store.close()


def fill(path: Path, leave_mib: int) -> None:
    """Write a file that leaves about ``leave_mib`` MiB free on ``path``'s filesystem."""
    stat = os.statvfs(path.parent)
    size = stat.f_bavail * stat.f_frsize - leave_mib * MIB
    with path.open("wb") as out:
        chunk = b"\0" * MIB
        for _ in range(size // MIB):
            out.write(chunk)


def test_a_full_disk_holds_claims_until_space_is_freed(lane_on_small_disk: Lane) -> None:
    lane = lane_on_small_disk
    lane.write_config(min_free_disk_mb=16)
    filler = lane.root.parent / "filler"
    fill(filler, leave_mib=8)
    daemon = lane.start()
    task = lane.add("waits for room")

    def hold() -> dict[str, str] | None:
        return json_of(lane.cli("status", "--json"))["daemon"]["hold"]  # type: ignore[index,return-value]

    lane.wait(lambda: (hold() or {}).get("kind") == "disk", what="claims held for disk space")
    assert "under min_free_disk_mb = 16" in hold()["reason"]  # type: ignore[index]
    assert str(lane.root) in hold()["reason"]  # type: ignore[index]
    assert "not claiming: disk space" in lane.cli("status").stdout
    waiting = lane.board.get_task(task.id)
    assert waiting.status is Status.READY and lane.runs(task.id) == []
    filler.unlink()
    lane.wait(lambda: lane.board.get_task(task.id).status is Status.DONE, what="the task to run")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_repository_on_a_full_disk_is_handed_back_and_holds_claims(
    lane: Lane, small_disk: Path
) -> None:
    """The daemon knows a repository's filesystem only once it claimed a task of it: that
    first run finds no room, goes back to ready uncounted, and claims wait for space."""
    lane.write_config(min_free_disk_mb=16)
    repo = lane.new_repo(small_disk / "repo")
    filler = small_disk / "filler"
    fill(filler, leave_mib=8)
    task = lane.add("waits for room", workspace=repo)
    daemon = lane.start()

    def hold() -> dict[str, str] | None:
        return json_of(lane.cli("status", "--json"))["daemon"]["hold"]  # type: ignore[index,return-value]

    lane.wait(lambda: (hold() or {}).get("kind") == "disk", what="claims held for disk space")
    assert str(repo) in hold()["reason"]  # type: ignore[index]
    waiting = lane.board.get_task(task.id)
    assert waiting.status is Status.READY and waiting.failure_count == 0
    assert [run.outcome for run in lane.runs(task.id)] == [Outcome.RECLAIMED]
    assert "under min_free_disk_mb = 16" in (lane.runs(task.id)[0].reason or "")
    filler.unlink()
    lane.wait(lambda: lane.board.get_task(task.id).status is Status.DONE, what="the task to run")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_free_space_under_the_minimum_is_named() -> None:
    spaces = [disk.Space("/home", 900 * MIB), disk.Space("/repo", 10 * MIB)]
    assert disk.shortage(spaces, 512) == (
        "disk space: /repo has 10 MiB free, under min_free_disk_mb = 512"
    )
    assert disk.shortage(spaces, 0) is None and disk.shortage(spaces[:1], 512) is None


def test_memory_pressure_is_graded() -> None:
    def reading(mib: int) -> memory.Reading:
        return memory.Reading(mib * MIB, "MemAvailable")

    assert memory.pressure(reading(100), 256, 1024) == memory.CRITICAL
    assert memory.pressure(reading(700), 256, 1024) == memory.ELEVATED
    assert memory.pressure(reading(4096), 256, 1024) == memory.OK
    assert memory.pressure(reading(700), 256, 0) == memory.OK  # elevated off
    assert memory.pressure(None, 256, 1024) == memory.OK  # unknown: fail open


def test_concurrency_zero_takes_its_slots_from_its_limits(lane: Lane) -> None:
    lane.write_config(concurrency=0, memory_per_run_mb=64)
    daemon = lane.start()
    expected = sizing.derived_concurrency(sizing.read_limits(), 64)

    def published() -> object:
        return json_of(lane.cli("status", "--json"))["daemon"]["concurrency"]  # type: ignore[index]

    lane.wait(lambda: published() is not None, what="the daemon to publish its status")
    assert published() == expected
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_release_on_stop_hands_running_work_back_uncounted(lane: Lane) -> None:
    """A pod scaled down never comes back: its runs go back to ready at SIGTERM, with a
    comment handing them over, instead of staying claimed for lease_ttl."""
    lane.write_config(release_on_stop=True, lease_ttl=3600.0)
    task = lane.add("long work", body="[sim:slow:0.2:200]", assignee="cli-codex-medium")
    daemon = lane.start()
    lane.wait(lambda: bool(lane.live_workers()), what="the provider to start")
    run_id = lane.board.get_task(task.id).current_run_id
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    assert lane.live_workers() == []
    back = lane.board.get_task(task.id)
    assert back.status is Status.READY and back.failure_count == 0
    assert run_id is not None and lane.board.get_run(run_id).outcome is Outcome.RECLAIMED
    handed = [c.body for c in lane.board.comments(task.id) if "handed back at shutdown" in c.body]
    assert len(handed) == 1 and "release_on_stop" in handed[0]
    assert f"lane/work/{task.id}" in handed[0]


def test_under_elevated_memory_pressure_runs_start_one_per_pass(lane: Lane) -> None:
    """Every reading is 'elevated' with the threshold above any machine's memory: four
    free slots and four ready tasks still start one run per pass, passes a claim sweep
    (1 s) apart, and status says so. (The spacing is the guard's own rule, not a speed.)"""
    gate = lane.root / "gate"
    gate.touch()  # every CLI waits after its first event: all four runs overlap
    lane.extra_env["LANE_RUNNER_SIM_GATE"] = str(gate)
    lane.write_config(concurrency=4, min_available_memory_mb=0, elevated_memory_mb=1 << 30)
    tasks = [lane.add(f"task {index}") for index in range(4)]
    daemon = lane.start()
    lane.wait(lambda: len(lane.live_workers()) == 4, what="all four runs to start")
    claimed = sorted(run.claimed_at for task in tasks for run in lane.runs(task.id))
    assert len(claimed) == 4
    assert all(later - earlier >= 0.9 for earlier, later in itertools.pairwise(claimed))
    assert "memory pressure elevated" in lane.cli("status").stdout
    gate.unlink()
    lane.wait(lane.all_done, what="the four tasks")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
