"""The operator commands in a subprocess on prepared homes: healthy, pending, quarantined,
a dead daemon's leftovers, and a live daemon scraped over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from typing import Any

import httpx
import orjson

from journal import Journal
from lane_runner.home import Home
from tests.harness import BOARD, Lane

RESULT = {
    "status": "completed",
    "summary": "done",
    "changed_files": [],
    "tests_run": [],
    "artifacts": [],
    "findings": [],
    "blockers": [],
}


def json_of(done: subprocess.CompletedProcess[str]) -> dict:  # type: ignore[type-arg]
    return orjson.loads(done.stdout)


def claimed_with_pending(lane: Lane) -> tuple[str, int]:
    """A running run whose accepted result sits in the journal, as a crash would leave it."""
    task = lane.add("crashed after accepting")
    claim = lane.board.claim(lane.node(), 600, "cli-auto")
    assert claim is not None and claim.task.id == task.id
    Journal(lane.home.lanes).write_pending(BOARD, task.id, claim.run.id, RESULT, "done", {})
    return task.id, claim.run.id


def test_healthy_home_after_a_run(lane: Lane) -> None:
    task = lane.add("one task")
    assert lane.cli("run", "--until-idle").returncode == 0
    verify = lane.cli("journal", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "journal clean" in verify.stdout
    listing = json_of(lane.cli("journal", "ls", "--state", "committed", "--json"))["entries"]
    assert [(e["task_id"], e["valid"]) for e in listing] == [(task.id, True)]
    human = lane.cli("journal", "ls").stdout
    assert "committed" in human and task.id in human
    state = json_of(lane.cli("status", "--json"))
    assert state["daemon"]["state"] == "stopped"
    assert state["boards"][BOARD]["counts"]["done"] == 1
    assert state["pending_finalizations"] == []
    rendered = lane.cli("logs", task.id)
    assert rendered.returncode == 0 and "ended: ok" in rendered.stdout
    assert '{"type"' not in rendered.stdout  # events are rendered, not dumped
    raw = lane.cli("logs", task.id, "--raw", "--board", BOARD).stdout
    assert '{"type"' in raw
    shown = lane.cli("task", "show", task.id).stdout  # the run's record as sections
    assert "metadata.route" not in shown and "metadata=below" in shown
    section = shown.split("run 1 completed:\n", 1)[1]
    assert section.startswith("  route:") and "\n  delivery:" in section, section
    assert "\n  goal:" not in section  # one turn is no goal
    checks = json_of(lane.cli("doctor", "--json"))
    levels = {c["name"]: c["level"] for c in checks["checks"]}
    assert levels["codex CLI"] == "pass" and levels[f"board {BOARD}"] == "pass"
    assert levels["rename-no-replace"] in ("pass", "warn")
    assert checks["exit_status"] == (1 if checks["worst"] == "fail" else 0)


def test_pending_record_is_listed_explained_and_counted(lane: Lane) -> None:
    task_id, run_id = claimed_with_pending(lane)
    verify = lane.cli("journal", "verify")
    assert verify.returncode == 1 and "pending" in verify.stdout
    assert json_of(lane.cli("journal", "verify", "--json"))["clean"] is False
    shown = json_of(lane.cli("journal", "show", "--task", task_id, "--json"))["entries"]
    pending = next(e for e in shown if e["state"] == "pending")
    assert pending["recover"]["action"] == "commit"
    assert pending["board_view"]["task_status"] == "running"
    assert pending["board_view"]["current_run_id"] == run_id
    human = lane.cli("journal", "show", pending["path"])
    assert human.returncode == 0 and "recover:  commit" in human.stdout
    state = json_of(lane.cli("status", "--json"))
    assert state["pending_finalizations"] == [
        {"board": BOARD, "task_id": task_id, "run_id": run_id, "state": "pending"}
    ]
    assert "1 finalization(s) pending" in lane.cli("status").stdout


def test_quarantined_entry_is_listed_after_recover(lane: Lane) -> None:
    task = lane.add("hostile file")
    bogus = lane.home.lane_dir(BOARD) / f"{task.id}.run-5.terminal.pending.json"
    bogus.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    bogus.write_bytes(b"not json")
    before = lane.cli("journal", "verify")
    assert before.returncode == 1 and "INVALID: malformed-payload" in before.stdout
    plan = json_of(lane.cli("journal", "show", str(bogus), "--json"))["entries"][0]["recover"]
    assert plan["action"] == "quarantine and make the run retryable"
    assert lane.cli("recover").returncode == 0
    diagnostics = json_of(lane.cli("journal", "ls", "--state", "quarantine-diagnostic", "--json"))
    assert len(diagnostics["entries"]) == 1 and diagnostics["entries"][0]["valid"]
    after = lane.cli("journal", "verify")
    assert after.returncode == 0 and "1 quarantine diagnostics" in after.stdout


def test_dead_daemon_leftovers_are_reported_stale(lane: Lane) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lane.home.lock_file.write_bytes(orjson.dumps({"pid": dead.pid, "command": "daemon"}))
    Home(lane.root).status_file.write_bytes(orjson.dumps({"pid": dead.pid, "active": [{}]}))
    done = lane.cli("status", "--json")
    assert done.returncode == 0
    daemon = json_of(done)["daemon"]
    assert daemon["state"] == "stale" and "stale" in daemon["detail"]
    assert json_of(done)["active"] == []  # a dead daemon's runs are not shown as running
    assert "daemon: stale" in lane.cli("status").stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_status_names_the_address_the_metrics_are_served_on(lane: Lane) -> None:
    port = free_port()
    lane.write_config(metrics_port=port, metrics_address="127.0.0.2")
    daemon = lane.start()
    lane.wait(lambda: json_of(lane.cli("status", "--json"))["daemon"]["state"] == "running",
              what="the daemon to publish its status")
    assert json_of(lane.cli("status", "--json"))["daemon"]["metrics_address"] == "127.0.0.2"
    assert f"metrics on http://127.0.0.2:{port}/metrics" in lane.cli("status").stdout
    assert "lane_runner_" in httpx.get(f"http://127.0.0.2:{port}/metrics", timeout=5).text
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_live_daemon_status_and_metrics(lane: Lane) -> None:
    port = free_port()
    lane.write_config(metrics_port=port)
    lane.set_capacity({"codex": "slow"})
    daemon = lane.start()
    task = lane.add("observed", body="SIM_SCENARIO=slow")

    seen: dict[str, Any] = {}

    def active() -> bool:
        """The status that shows the run (a second look could come after it ended)."""
        seen.update(json_of(lane.cli("status", "--json")))
        return seen["daemon"]["state"] == "running" and bool(seen["active"])

    lane.wait(active, what="status showing the active run")
    state = seen
    assert state["daemon"]["pid"] == daemon.pid and state["daemon"]["metrics_port"] == port
    run = state["active"][0]
    assert run["task_id"] == task.id and run["log_path"].endswith(f"{task.id}.log")
    lane.wait(lane.all_done, what="the task to finish")

    def scraped() -> str:
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text

    lane.wait(lambda: "lane_runner_completions_total" in scraped(), what="completion metric")
    text = scraped()
    assert f'lane_runner_claims_total{{board="{BOARD}"}} 1.0' in text
    assert f'lane_runner_completions_total{{board="{BOARD}"}} 1.0' in text
    assert 'lane_runner_run_duration_seconds_count{step="committed"} 1.0' in text
    assert "lane_runner_journal_commit_seconds_count 1.0" in text
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    assert not Home(lane.root).status_file.exists()
    assert json_of(lane.cli("status", "--json"))["daemon"]["state"] == "stopped"


def test_logs_follow_prints_appended_lines(lane: Lane) -> None:
    log = lane.home.log_file(BOARD, "t1")
    log.parent.mkdir(parents=True)
    log.write_text('{"type":"thread.started","thread_id":"th-1"}\n')
    # Ctrl-C as a terminal delivers it: a test run started in the background has
    # SIGINT ignored, and a child would inherit that. A handler does not survive exec.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        follower = subprocess.Popen(
            [sys.executable, "-m", "lane_runner.cli.main", "--home", str(lane.root),
             "logs", "t1", "-f"],
            stdout=subprocess.PIPE,
            text=True,
            env=lane.environ(),
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "codex thread th-1\n"
        with log.open("a") as handle:
            handle.write('{"type":"error","message":"Reconnecting... 1/5"}\n')
        assert follower.stdout.readline() == "error: Reconnecting... 1/5\n"
    finally:
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
    assert os.path.exists(log)


def test_unknown_task_log_is_a_usage_error(lane: Lane) -> None:
    done = lane.cli("logs", "nope")
    assert done.returncode == 2 and "no log for task" in done.stderr


def test_status_shows_tasks_that_keep_cooling_down(lane: Lane) -> None:
    lane.set_capacity({"codex": "capacity", "claude": "capacity"})
    lane.start()
    task = lane.add("nowhere to run")

    def cycling() -> list[dict]:  # type: ignore[type-arg]
        return json_of(lane.cli("status", "--json"))["cycling"]

    lane.wait(lambda: bool(cycling()), what="status listing the cycling task")
    [entry] = cycling()
    assert (entry["board"], entry["task_id"], entry["last_cause"]) == (BOARD, task.id, "capacity")
    assert entry["cooldowns"] >= 1
    shown = lane.cli("status").stdout
    assert "cycling (blocked at 24 in a row)" in shown and task.id in shown


def test_logs_follow_ends_with_the_run(lane: Lane) -> None:
    """Started while the run works, the follow prints to the run's last line and exits 0
    once the board says the run has ended; a finished task has nothing to follow."""
    task = lane.add("slow", body="[sim:slow:0.2:15]", assignee="cli-codex-low")
    daemon = lane.start()
    log = lane.home.log_file(BOARD, task.id)
    lane.wait(lambda: log.exists() and b"still working (2/15)" in log.read_bytes(),
              what="the run to be under way")
    follower = subprocess.Popen(
        [sys.executable, "-m", "lane_runner.cli.main", "--home", str(lane.root),
         "logs", task.id, "-f"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=lane.environ(),
    )
    try:
        out, err = follower.communicate(timeout=90)  # the run takes about 3 s
    except subprocess.TimeoutExpired:
        follower.kill()
        raise AssertionError("logs --follow went on after the run ended") from None
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    assert follower.returncode == 0, err
    assert "still working (15/15)" in out and "turn completed" in out
    finished = lane.cli("logs", task.id, "-f", timeout=60)
    assert finished.returncode == 0 and "turn completed" in finished.stdout
