"""The operator controls end to end, written once and run on SQLite (tests/operator) and on
PostgreSQL (tests/postgres): a real daemon, the real CLI in subprocesses, simulated CLIs.

A ``Site`` is a runner's home with a board: the SQLite ``Lane`` of ``tests/harness.py``
or a PostgreSQL pod. Every assertion reads what an operator would read: the CLI's
``--json``, the board, the task's comments.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from lane_runner.board.base import Board
from lane_runner.board.model import BlockKind, Outcome, Status, Task

SLOW = "[sim:slow:0.2:10]"  # two seconds of steady provider events


class Site(Protocol):
    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]: ...
    def start(self, *args: str) -> subprocess.Popen[bytes]: ...
    def write_config(self, **changes: object) -> None: ...
    def add(
        self, title: str, body: str = "", assignee: str = "cli-auto", **extra: object
    ) -> Task: ...
    def wait(self, condition: Callable[[], bool], timeout: float = 60, what: str = "") -> None: ...
    @property
    def board(self) -> Board: ...
    def lane_state(self, task_id: str) -> dict[str, Any]: ...
    def live_workers(self) -> list[int]: ...


def json_of(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stdout + done.stderr
    return orjson.loads(done.stdout)


def status(site: Site) -> dict[str, Any]:
    return json_of(site.cli("status", "--json"))  # type: ignore[no-any-return]


def held(site: Site, kind: str) -> Callable[[], bool]:
    """The running daemon says it claims nothing, for ``kind``."""

    def check() -> bool:
        hold = status(site)["daemon"].get("hold")
        return bool(hold) and hold["kind"] == kind

    return check


def state_is(site: Site, task: Task, wanted: Status) -> Callable[[], bool]:
    return lambda: site.board.get_task(task.id).status is wanted


def stop(daemon: subprocess.Popen[bytes]) -> None:
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0


def comments(site: Site, task: Task, prefix: str) -> list[str]:
    return [c.body for c in site.board.comments(task.id) if c.body.startswith(prefix)]


# -- pause, resume, drain ---------------------------------------------------------------


def pause_survives_restart_and_drains(site: Site) -> None:
    paused = json_of(site.cli("pause", "--reason", "maintenance window", "--json"))
    assert paused["paused"] is True and paused["reason"] == "maintenance window"
    daemon = site.start()
    task = site.add("held back")
    site.wait(held(site, "paused"), what="the daemon to report its pause")
    shown = status(site)
    assert shown["paused"]["reason"] == "maintenance window"
    assert "not claiming: runner paused: maintenance window" in site.cli("status").stdout
    assert site.board.runs(task.id) == []
    stop(daemon)
    daemon = site.start()  # the pause is a file in the home: a restart keeps it
    site.wait(held(site, "paused"), what="the restarted daemon to stay paused")
    assert site.board.runs(task.id) == []
    resumed = json_of(site.cli("resume", "--json"))
    assert resumed == {"paused": False, "board": None, "was_paused": True}
    site.wait(state_is(site, task, Status.DONE), what="the task after resume")

    slow = site.add("running through the drain", body=SLOW)
    site.wait(state_is(site, slow, Status.RUNNING), what="the slow task to start")
    drained = json_of(site.cli("pause", "--wait", "--json"))
    assert drained["running"] == 0
    # The drain let the run finish (it was not cut short) and the daemon runs nothing.
    # Its result may still wait in the journal for a board busy with other work (the
    # replay commits it, paused or not); a run cut short would never become done, as a
    # paused daemon claims nothing again.
    shown = status(site)
    assert shown["active"] == [], (drained, shown, site.board.runs(slow.id))
    site.wait(state_is(site, slow, Status.DONE), what="the drained run's result")
    assert [run.outcome for run in site.board.runs(slow.id)] == [Outcome.COMPLETED]
    after = site.add("filed during the pause")
    site.wait(held(site, "paused"), what="the pause after the drain")
    assert site.board.runs(after.id) == []
    json_of(site.cli("resume", "--json"))
    site.wait(state_is(site, after, Status.DONE), what="work after the drain")
    stop(daemon)


def drain_timeout_says_what_is_left(site: Site) -> None:
    daemon = site.start()
    task = site.add("long", body="[sim:slow:0.2:100]")
    site.wait(state_is(site, task, Status.RUNNING), what="the long task to start")
    done = site.cli("pause", "--wait", "--timeout", "0.5")
    assert done.returncode == 1 and "still running" in done.stderr, done.stderr
    assert site.cli("pause", "--timeout", "3").returncode == 2  # --timeout needs --wait
    json_of(site.cli("resume", "--json"))
    stop(daemon)


# -- per-provider caps ------------------------------------------------------------------


def _overlaps(intervals: list[tuple[float, float]]) -> bool:
    ordered = sorted(intervals)
    return any(later[0] < earlier[1] for earlier, later in zip(ordered, ordered[1:], strict=False))


def cap_makes_runs_wait(site: Site) -> None:
    site.write_config(max_running_codex=1, concurrency=4)
    # Six seconds each: every view below is waited for by polling `status`, a process
    # of its own that a loaded machine may take a second or two to start.
    tasks = [
        site.add(f"capped {n}", body="[sim:slow:0.2:30]", assignee="cli-codex-low")
        for n in range(3)
    ]
    daemon = site.start()

    def waiting() -> bool:
        slots = status(site)["daemon"].get("slots") or {}
        return slots.get("waiting", 0) >= 1

    site.wait(waiting, what="a run waiting for the codex slot")
    # Between two runs the slot is briefly free, so each view is waited for, not sampled.
    site.wait(lambda: status(site)["daemon"]["slots"]["providers"]["codex"]
              == {"running": 1, "cap": 1}, what="the codex slot taken, in --json")
    site.wait(lambda: "provider caps: codex 1/1" in site.cli("status").stdout,
              what="the codex slot taken, for people")
    site.wait(lambda: all(site.board.get_task(t.id).status is Status.DONE for t in tasks),
              what="every capped task")
    attempts = [
        (a["started_at"], a["ended_at"])
        for t in tasks
        for a in site.lane_state(t.id)["attempts"]
    ]
    assert len(attempts) == 3 and not _overlaps(attempts)
    assert any(comments(site, t, "waiting for a codex slot") for t in tasks)
    stop(daemon)


def full_provider_falls_back(site: Site) -> None:
    site.write_config(max_running_codex=1, provider_full="fallback", concurrency=4)
    tasks = [site.add(f"either {n}", body=SLOW) for n in range(2)]
    daemon = site.start()
    site.wait(lambda: all(site.board.get_task(t.id).status is Status.DONE for t in tasks),
              what="both tasks")
    providers = sorted(site.lane_state(t.id)["provider"] for t in tasks)
    assert providers == ["claude", "codex"]
    stop(daemon)


# -- memory pressure --------------------------------------------------------------------


def memory_pressure_holds_claims(site: Site) -> None:
    site.write_config(min_available_memory_mb=1 << 30)  # a petabyte: never available
    daemon = site.start()
    task = site.add("needs memory")
    site.wait(held(site, "memory"), what="the daemon to report memory pressure")
    reason = status(site)["daemon"]["hold"]["reason"]
    assert "memory pressure" in reason and "min_available_memory_mb" in reason
    assert status(site)["daemon"]["memory"]["available"] > 0
    assert site.board.runs(task.id) == []
    site.write_config(min_available_memory_mb=0)
    daemon.send_signal(signal.SIGHUP)
    site.wait(state_is(site, task, Status.DONE), what="the task once the guard is off")
    stop(daemon)


# -- stuck-run warnings -----------------------------------------------------------------


def stuck_runs_warn_once(site: Site, metrics_port: int, scrape: Callable[[], str]) -> None:
    site.write_config(stall_timeout=60.0, stuck_warning_fraction=0.05, metrics_port=metrics_port)
    daemon = site.start()
    quiet = site.add("goes quiet", body="[sim:hang]", max_runtime=3600.0)
    long = site.add("runs long", body="[sim:slow:0.2:100]", max_runtime=40.0)

    def warned(task: Task, kind: str) -> Callable[[], bool]:
        def check() -> bool:
            runs = [r for r in status(site)["active"] if r["task_id"] == task.id]
            return bool(runs) and any(w["kind"] == kind for w in runs[0]["warnings"])

        return check

    site.wait(warned(quiet, "quiet"), what="the quiet warning in status")
    site.wait(warned(long, "long"), what="the long-runtime warning in status")
    site.wait(lambda: bool(comments(site, quiet, "warning: run")), what="the quiet comment")
    site.wait(lambda: bool(comments(site, long, "warning: run")), what="the long comment")
    site.wait(lambda: 'lane_runner_stuck_runs{kind="quiet"} 1.0' in scrape(), what="metrics")
    text = scrape()
    assert 'lane_runner_stuck_runs{kind="long"} 1.0' in text
    assert 'lane_runner_stuck_warnings_total{kind="quiet"} 1.0' in text
    # Several more turns of the loop later, still one comment per run and kind.
    published = status(site)["daemon"]["published_at"]
    site.wait(lambda: status(site)["daemon"]["published_at"] != published, what="a later turn")
    assert len(comments(site, quiet, "warning: run")) == 1
    assert len(comments(site, long, "warning: run")) == 1
    assert "no meaningful event" in comments(site, quiet, "warning: run")[0]
    assert "maximum runtime" in comments(site, long, "warning: run")[0]
    assert "no meaningful event" in site.cli("status").stdout
    stop(daemon)


# -- dry run ----------------------------------------------------------------------------


def dry_run_claims_nothing(site: Site) -> None:
    json_of(site.cli("pause", "--json"))  # a live daemon that must not take the task meanwhile
    daemon = site.start()
    task = site.add("where would it go", assignee="cli-claude-medium")
    site.wait(held(site, "paused"), what="the paused daemon")
    everything = json_of(site.cli("run", "--dry-run", "--json"))
    [found] = [item for item in everything if item["task_id"] == task.id]
    assert found["route"]["provider"] == "claude" and found["route"]["effort"] == "medium"
    assert found["argv"][0].endswith("claude") and "--model" in found["argv"]
    assert found["argv"][found["argv"].index("--model") + 1] == found["route"]["model"]
    assert found["error"] is None
    one = json_of(site.cli("task", "route", task.id, "--board", site.board.slug, "--json"))
    assert [item["route"]["provider"] for item in one] == ["claude"]
    human = site.cli("task", "route", task.id, "--board", site.board.slug)
    assert "claude" in human.stdout and "argv" in human.stdout
    site.write_config(router_url="http://operator:s3cret-word@127.0.0.1:9/v1?token=t0ken-value")
    broken = site.cli("run", "--dry-run", "--board", site.board.slug, "--json")
    assert broken.returncode == 1, broken.stderr  # the preview says error: so does the exit
    [routed] = [item for item in orjson.loads(broken.stdout) if item["task_id"] == task.id]
    assert routed["error"] and "routing failed" in routed["error"]
    assert "s3cret-word" not in broken.stdout + broken.stderr
    assert "t0ken-value" not in broken.stdout + broken.stderr
    assert site.board.runs(task.id) == [] and site.board.get_task(task.id).status is Status.READY
    assert site.cli("run", "--json").returncode == 2  # --json without --dry-run is a usage error
    stop(daemon)


# -- task stop --------------------------------------------------------------------------


def _started(site: Site, task: Task) -> Callable[[], bool]:
    """The task's provider process is running under the daemon."""

    def check() -> bool:
        runs = [r for r in status(site)["active"] if r["task_id"] == task.id]
        return bool(runs) and runs[0]["pid"] is not None

    return check


def task_stop_ends_the_tree(site: Site, operator: Site) -> None:
    """``operator`` is another shell of the same home, or another node of the same board."""
    daemon = site.start()
    slug = site.board.slug
    task = site.add("going nowhere", body="[sim:hang]")
    site.wait(_started(site, task), what="the hanging CLI to start")
    assert site.live_workers()
    stopped = json_of(operator.cli(
        "task", "stop", task.id, "--board", slug, "--reason", "wrong approach", "--wait", "--json"
    ))
    run, shown = stopped["run"], stopped["task"]
    assert run["outcome"] == "blocked" and "wrong approach" in run["reason"]
    assert shown["status"] == "blocked" and shown["block_kind"] == "needs_input"
    assert shown["failure_count"] == 0  # not a counted failure
    site.wait(lambda: not site.live_workers(), what="the process tree to be gone")
    kinds = [e.kind for e in site.board.events(task.id)]
    assert "stop_requested" in kinds and kinds[-1] == "blocked"
    refused = operator.cli("task", "stop", task.id, "--board", slug)
    assert refused.returncode == 2 and "not running" in refused.stderr

    again = site.add("to run later", body="[sim:hang]")
    site.wait(_started(site, again), what="the second CLI to start")
    json_of(site.cli("pause", "--json"))  # so the requeued task is not claimed at once
    requeued = json_of(operator.cli(
        "task", "stop", again.id, "--board", slug, "--requeue", "--wait", "--json"
    ))
    assert requeued["run"]["outcome"] == "reclaimed"
    assert requeued["task"]["status"] == "ready" and requeued["task"]["failure_count"] == 0
    site.wait(lambda: not site.live_workers(), what="the second tree to be gone")
    assert site.cli("task", "stop", again.id, "--board", slug, "--timeout", "3").returncode == 2
    stop(daemon)


# -- board pause ------------------------------------------------------------------------


def board_pause_holds_every_runner(site: Site, operator: Site) -> None:
    slug = site.board.slug
    daemon = site.start()
    slow = site.add("running when the board is paused", body=SLOW)
    site.wait(state_is(site, slow, Status.RUNNING), what="the slow task to start")
    drained = json_of(operator.cli("pause", "--board", slug, "--reason", "db upgrade",
                                   "--wait", "--json"))
    assert drained["board"] == slug and drained["running"] == 0
    assert site.board.get_task(slow.id).status is Status.DONE  # finished, not cut short
    task = site.add("filed on the paused board")
    site.wait(held(site, "board_paused"), what="the daemon to report the board's pause")
    shown = status(site)
    assert shown["boards"][slug]["paused"]["reason"] == "db upgrade"
    assert "db upgrade" in site.cli("status").stdout
    assert site.board.runs(task.id) == []
    resumed = json_of(operator.cli("resume", "--board", slug, "--json"))
    assert resumed["was_paused"] is True
    site.wait(state_is(site, task, Status.DONE), what="the task after the board resumed")
    stop(daemon)


# -- per-task retry limit ---------------------------------------------------------------


def max_retries_overrides_the_failure_limit(site: Site) -> None:
    slug = site.board.slug
    added = json_of(site.cli(
        "task", "add", "--board", slug, "--title", "fails once", "--body", "[sim:crash]",
        "--workspace", "repo", "--max-retries", "0", "--json",
    ))
    assert added["max_retries"] == 0
    once = site.board.get_task(added["id"])
    daemon = site.start()
    site.wait(state_is(site, once, Status.BLOCKED), what="the task to give up")
    shown = site.board.get_task(once.id)
    assert shown.block_kind is BlockKind.GAVE_UP and len(site.board.runs(once.id)) == 1
    bad = site.cli("task", "add", "--board", slug, "--title", "x", "--max-retries", "-1")
    assert bad.returncode == 2 and "--max-retries" in bad.stderr
    stop(daemon)
