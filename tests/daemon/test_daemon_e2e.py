"""The daemon end to end: real subprocesses, real simulated CLIs, real signals, a real board."""

from __future__ import annotations

import random
import signal
import sqlite3
import stat
import subprocess
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

from lane_runner.board.model import NewTask, Outcome, Status
from lane_runner.providers.simulators.play import OUTPUT_FILE
from tests.harness import BOARD, Lane, assert_done_exactly_once, git


def test_fifty_tasks_at_concurrency_four_are_each_done_exactly_once(lane: Lane) -> None:
    assignees = ["cli-auto", "cli-codex-low", "cli-claude-high", "cli-codex-xhigh"]
    for index in range(50):
        lane.add(f"task {index}", assignee=assignees[index % 4])
    daemon = lane.start("--until-idle")
    assert daemon.wait(timeout=240) == 0
    assert_done_exactly_once(lane.board, [lane.home])
    providers = {
        orjson.loads((lane.home.lane_dir(BOARD) / f"{t.id}.json").read_bytes())["provider"]
        for t in lane.tasks()
    }
    assert providers == {"codex", "claude"}
    assert lane.live_workers() == []


def test_a_board_removed_and_made_again_under_the_daemon_is_served_again(lane: Lane) -> None:
    daemon = lane.start()
    first = lane.add("before")
    lane.wait(lambda: lane.board.get_task(first.id).status is Status.DONE, what="the first task")
    path = lane.home.board_file(BOARD)
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        path.with_name(name).unlink(missing_ok=True)
    made = lane.cli("board", "create", BOARD)
    assert made.returncode == 0, made.stderr
    second = lane.add("after")
    lane.wait(lambda: lane.board.get_task(second.id).status is Status.DONE, what="the new board")
    with closing(sqlite3.connect(path)) as on_disk:  # the file the path names, not a store's
        assert on_disk.execute("SELECT id, status FROM tasks").fetchall() == [(second.id, "done")]
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    assert "replaced or removed" in (lane.root / "daemon.log").read_text()


def test_chaos_twenty_kill_9s_during_a_hundred_tasks(lane: Lane) -> None:
    """SIGKILL the daemon at random moments, restart each time: still exactly once."""
    lane.write_config(concurrency=6)
    for index in range(100):
        lane.add(f"chaos {index}", body="[sim:slow:0.02:3]" if index % 3 == 0 else "")
    rng = random.Random(20261130)
    for _ in range(20):
        daemon = lane.start()
        time.sleep(rng.uniform(0.2, 1.5))
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
    finished = lane.start("--until-idle")
    assert finished.wait(timeout=300) == 0
    assert_done_exactly_once(lane.board, [lane.home])
    assert lane.live_workers() == []


def saved_state(lane: Lane, task_id: str) -> dict[str, Any]:
    """The task's lane state as saved now; empty before its first save."""
    try:
        return orjson.loads((lane.home.lane_dir(BOARD) / f"{task_id}.json").read_bytes())  # type: ignore[no-any-return]
    except FileNotFoundError:
        return {}


def test_sigterm_mid_run_exits_cleanly_and_the_run_resumes_after_restart(lane: Lane) -> None:
    task = lane.add("slow work", body="[sim:slow:0.1:40]", assignee="cli-codex-medium")
    daemon = lane.start()
    # The provider's session is saved when its first event names it: a SIGTERM before
    # that leaves no session to resume (seen under load), which is not what this tests.
    lane.wait(lambda: "codex" in saved_state(lane, task.id).get("sessions", {}),
              what="the provider's session to be saved")
    first_run = lane.board.get_task(task.id).current_run_id
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    assert lane.live_workers() == []
    assert lane.board.get_task(task.id).status is Status.RUNNING  # left claimed for resume
    thread = saved_state(lane, task.id)["sessions"]["codex"]
    lane.write_config(shutdown_grace=30.0)
    assert lane.start("--until-idle").wait(timeout=60) == 0
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE and done.completed_run_id != first_run
    reclaimed = lane.board.get_run(first_run)
    assert reclaimed.outcome is Outcome.RECLAIMED and done.failure_count == 0
    state = orjson.loads((lane.home.lane_dir(BOARD) / f"{task.id}.json").read_bytes())
    assert state["sessions"]["codex"] == thread  # the same thread resumed


def test_a_lost_lease_kills_the_provider_and_commits_nothing_for_that_run(lane: Lane) -> None:
    task = lane.add("slow work", body="[sim:slow:0.1:100]", assignee="cli-claude-low")
    daemon = lane.start()
    lane.wait(lambda: bool(lane.live_workers()), what="the provider to start")
    run_id = lane.board.get_task(task.id).current_run_id
    assert run_id is not None
    # Paused first: between the reclaim and the archive the daemon could claim it again
    # (seen in CI: the archive then refused a running task).
    lane.board.pause("the test takes the task away", "test")
    lane.board.reclaim(run_id, "another node rescued it", Outcome.EXPIRED)
    lane.board.archive(task.id)  # keep the daemon from claiming it again
    lane.wait(lambda: lane.live_workers() == [], timeout=30, what="the provider to be killed")
    lane.wait(
        lambda: [a["classification"] for a in saved_state(lane, task.id).get("attempts", [])][-1:]
        == ["lease_lost"],
        timeout=10,
        what="the attempt to end as lease_lost",
    )
    names = [p.name for p in lane.home.lane_dir(BOARD).iterdir()]
    assert not [n for n in names if f"run-{run_id}.terminal" in n]
    assert lane.board.get_task(task.id).completed_run_id is None
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_codex_out_of_reconnects_falls_back_freeing_its_slot(lane: Lane) -> None:
    lane.write_config(stall_timeout=600.0, concurrency=1)
    stuck = lane.add(
        "offline codex", body="[sim@codex:reconnect-forever]", assignee="cli-codex-low"
    )
    other = lane.add("next in line", assignee="cli-claude-low")
    assert lane.start("--until-idle").wait(timeout=60) == 0
    assert lane.board.get_task(stuck.id).status is Status.DONE
    assert lane.board.get_task(other.id).status is Status.DONE
    state = orjson.loads((lane.home.lane_dir(BOARD) / f"{stuck.id}.json").read_bytes())
    assert [a["classification"] for a in state["attempts"]] == ["auth", "ok"]
    assert [a["provider"] for a in state["attempts"]] == ["codex", "claude"]


def test_an_answer_followed_by_a_lingering_cli_is_kept_not_stalled(lane: Lane) -> None:
    """Claude prints its result, then stays alive (a SessionEnd hook, say): the attempt ends
    after the closing grace (5 s) with its answer, judged and committed, never "stalled ->
    fallback" to codex once the stall clock (10 s) runs out (issue 26, finding 1)."""
    lane.write_config(stall_timeout=10.0)
    task = lane.add("answer then linger", body="[sim@claude:linger]", assignee="cli-claude-low")
    assert lane.start("--until-idle").wait(timeout=60) == 0
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE and done.result is not None
    state = lane.lane_state(task.id)
    attempts = state["attempts"]
    assert isinstance(attempts, list)
    assert [(a["provider"], a["classification"]) for a in attempts] == [("claude", "ok")]
    candidate = f"{task.id}.run-{done.completed_run_id}.candidate-{attempts[0]['n']}.json"
    assert (lane.home.lane_dir(BOARD) / candidate).exists()
    assert lane.live_workers() == []


def test_every_provider_stalled_is_a_cooldown_not_a_failure(lane: Lane) -> None:
    lane.write_config(stall_timeout=0.5, cooldown_base=30.0, cooldown_max=60.0)
    task = lane.add("offline everywhere", body="[sim:reconnect-forever]")
    daemon = lane.start()
    lane.wait(lambda: lane.board.get_task(task.id).next_attempt_at is not None, what="a cooldown")
    waiting = lane.board.get_task(task.id)
    assert waiting.status is Status.READY and waiting.failure_count == 0
    assert waiting.next_attempt_at is not None and waiting.next_attempt_at > time.time() + 20
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_both_providers_out_of_capacity_cool_down_then_succeed(lane: Lane) -> None:
    lane.set_capacity({"codex": "capacity", "claude": "capacity"})
    task = lane.add("needs capacity", assignee="cli-codex-high")
    daemon = lane.start()
    lane.wait(lambda: len(lane.runs(task.id)) >= 2, what="two capacity waits")
    waiting = lane.board.get_task(task.id)
    assert waiting.status in (Status.READY, Status.RUNNING) and waiting.failure_count == 0
    ended = [run for run in lane.runs(task.id) if run.outcome is not None]
    assert all(run.outcome is Outcome.RECLAIMED for run in ended)
    assert all((run.reason or "").startswith("capacity:") for run in ended)
    health = orjson.loads((lane.home.provider_health / "codex.json").read_bytes())
    assert health["state"] == "unavailable"
    lane.set_capacity({})
    lane.wait(lambda: lane.board.get_task(task.id).status is Status.DONE, what="success")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    assert_done_exactly_once(lane.board, [lane.home])


def test_a_finalization_waits_for_an_unavailable_board_then_commits(lane: Lane) -> None:
    lane.write_config(lease_ttl=600.0)
    task = lane.add("result while the board is away", body="[sim:slow:0.2:5]")
    daemon = lane.start()
    lane.wait(lambda: bool(lane.live_workers()), what="the provider to start")
    blocker = sqlite3.connect(lane.home.board_file(BOARD), isolation_level=None, timeout=30)
    blocker.execute("BEGIN EXCLUSIVE")  # the board refuses every write from now on
    try:
        pending = lane.home.lane_dir(BOARD)
        lane.wait(
            lambda: (
                any(p.name.endswith("terminal.pending.json") for p in pending.iterdir())
                or any("prepared" in p.name for p in pending.iterdir())
            ),
            timeout=90,
            what="the accepted result to wait in the journal",
        )
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        recover = lane.cli("recover", "--json")
        assert recover.returncode == 3, recover.stdout + recover.stderr
        assert orjson.loads(recover.stdout)["pending_left"] >= 1
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    recover = lane.cli("recover", "--json")
    assert recover.returncode == 0, recover.stdout + recover.stderr
    assert lane.board.get_task(task.id).status is Status.DONE
    assert_done_exactly_once(lane.board, [lane.home])


@pytest.mark.parametrize("command", [("run",), ("recover",)])
def test_a_second_daemon_or_recover_is_refused_naming_the_holder(
    lane: Lane, command: tuple[str, ...]
) -> None:
    daemon = lane.start()
    lane.wait(
        lambda: (
            (lane.root / "runner.lock").exists()
            and b"daemon" in (lane.root / "runner.lock").read_bytes()
        ),
        what="the lock",
    )
    second = lane.cli(*command)
    assert second.returncode == 1
    assert f"pid {daemon.pid}" in second.stderr
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_monorepo_folder_and_a_branch_named_like_the_board_stop_no_task(lane: Lane) -> None:
    """``--workspace repo/service-a``: the CLI works in service-a of the task's worktree. A
    branch named lane/work in the repository (git then has no room for lane/work/<task>)
    leaves the board's tasks their flat branch, lane-work-<task> (issue 26, finding 7)."""
    service = lane.repo / "service-a"
    service.mkdir()
    (service / "main.py").write_text("print()\n")
    git("add", ".", cwd=lane.repo)
    git("commit", "-qm", "a service", cwd=lane.repo)
    git("branch", f"lane/{BOARD}", cwd=lane.repo)
    in_service = lane.board.add_task(
        NewTask(title="in the service", assignee="cli-auto", workspace=str(service))
    )
    at_top = lane.add("at the top")
    daemon = lane.start("--until-idle")
    assert daemon.wait(timeout=120) == 0
    assert [lane.board.get_task(t.id).status for t in (in_service, at_top)] == [Status.DONE] * 2
    worktree = lane.home.worktree(BOARD, in_service.id)
    assert (worktree / "service-a" / OUTPUT_FILE).exists()
    assert not (worktree / OUTPUT_FILE).exists()
    for task in (in_service, at_top):
        branch = subprocess.run(
            ["git", "branch", "--show-current"], cwd=lane.home.worktree(BOARD, task.id),
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        assert branch == f"lane-{BOARD}-{task.id}"


def test_a_daemon_killed_by_a_fault_leaves_its_threads_stacks_in_its_log(lane: Lane) -> None:
    """A fault in a C extension ends the interpreter by signal (seen once in CI: a daemon
    exited -11 with nothing said); its log then names where every thread was."""
    lane.add("slow work", body="[sim:slow:0.1:40]", assignee="cli-codex-medium")
    daemon = lane.start()
    lane.wait(lambda: bool(lane.live_workers()), what="the provider to start")
    daemon.send_signal(signal.SIGSEGV)
    assert daemon.wait(timeout=30) == -signal.SIGSEGV
    log = (lane.root / "daemon.log").read_text(errors="replace")
    assert "Fatal Python error: Segmentation fault" in log
    assert "lane_runner/daemon.py" in log


def test_recovery_makes_the_answer_files_a_killed_daemon_left_private(
    lane: Lane, tmp_path: Path
) -> None:
    """A daemon killed between a CLI's answer and its chmod leaves the answer file with
    the CLI's umask (the demo's home failed doctor's private modes so, once in CI);
    recovery narrows it, and never follows a link named like one. Caught: recovery
    without ``_private_answers`` (the file stays 0644)."""
    lanes = lane.home.lane_dir(BOARD)
    lanes.mkdir(parents=True, exist_ok=True)
    left = lanes / "t-1.run-3.provider-1.result.json"
    left.write_text('{"status": "completed"}')
    left.chmod(0o644)
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    outside.chmod(0o644)
    (lanes / "t-2.run-4.provider-1.result.json").symlink_to(outside)

    assert lane.cli("recover").returncode == 0
    assert stat.S_IMODE(left.stat().st_mode) == 0o600
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
