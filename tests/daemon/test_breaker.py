"""The storm breaker and the backoff on counted failures (issue 32): a broken environment
stops claims after a few tasks, not after every task's whole failure budget."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

import httpx

from lane_runner.board.model import Status
from lane_runner.service import breaker
from tests.harness import BOARD, Lane, git


def json_of(done: object) -> dict[str, object]:
    return json.loads(done.stdout)  # type: ignore[attr-defined,no-any-return]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the pure parts ------------------------------------------------------------------


def test_one_failure_worded_with_other_numbers_and_paths_is_one_fingerprint() -> None:
    first = breaker.fingerprint(
        "hook before_run", "before_run failed (exit 127): /srv/w/a1/bin/lint: not found (pid 4121)"
    )
    second = breaker.fingerprint(
        "hook before_run", "before_run failed (exit 127): /srv/w/b7/bin/lint: not found (pid 77)"
    )
    other = breaker.fingerprint("hook before_run", "before_run failed (exit 1): tests failed")
    assert first == second != other
    assert breaker.fingerprint("failed", "x") != breaker.fingerprint("timed_out", "x")


def test_the_threshold_counts_distinct_tasks_within_the_window() -> None:
    def failure(task: str, at: float, where: str = "provider:codex") -> breaker.Failure:
        return breaker.Failure(where, "failed: boom", task, "boom", at)

    same_task = [failure("b/t1", 0), failure("b/t1", 1), failure("b/t1", 2)]
    assert breaker.tripping(same_task, 3, 60, 2) == []
    spread = [failure("b/t1", 0), failure("b/t2", 100), failure("b/t3", 200)]
    assert breaker.tripping(spread, 3, 60, 200) == []  # too far apart
    near = [failure("b/t1", 0), failure("b/t2", 1), failure("b/t3", 2, "provider:claude")]
    assert breaker.tripping(near, 3, 60, 2) == []  # another scope
    near[2] = failure("b/t3", 2)
    assert [(s, f) for s, f, _ in breaker.tripping(near, 3, 60, 2)] == [
        ("provider:codex", "failed: boom")
    ]
    assert breaker.tripping(near, 0, 60, 2) == []  # 0: off


def test_a_trip_holds_until_a_probe_is_due_and_a_success_clears_it(tmp_path: Path) -> None:
    state = breaker.Breaker(tmp_path / "breaker.json", threshold=2, window=60, probe_interval=100)
    where = breaker.scope(breaker.PROVIDER, "codex")
    assert state.failed(breaker.Failure(where, "f", "b/t1", "boom", 0)) is None
    trip = state.failed(breaker.Failure(where, "f", "b/t2", "boom", 1))
    assert trip is not None and trip.tasks == ["b/t1", "b/t2"] and trip.count == 2
    assert state.blocked(where, 50) is not None and not state.admits(where, 50)
    assert state.admits(where, 101)  # the probe, once
    assert not state.admits(where, 102) and state.trips()[where].probes == 1
    assert state.succeeded(where) and state.trips() == {}
    assert state.admits(where, 103)


def _workspace_failure(workspace: str, task: str, at: float = 0) -> breaker.Failure:
    return breaker.Failure(
        breaker.workspace_scope("b", workspace), "hook before_run: lint", f"b/{task}", "lint",
        at, breaker.scope(breaker.BOARD, "b"),
    )


def test_a_workspace_trips_alone_and_one_failure_across_workspaces_trips_the_board(
    tmp_path: Path,
) -> None:
    state = breaker.Breaker(tmp_path / "breaker.json", threshold=3, window=60, probe_interval=100)
    assert state.failed(_workspace_failure("/srv/a", "t1")) is None
    assert state.failed(_workspace_failure("/srv/a", "t2")) is None
    trip = state.failed(_workspace_failure("/srv/a", "t3"))
    assert trip is not None and trip.scope == "workspace:b:/srv/a" and trip.count == 3
    assert "workspace /srv/a of board b is marked broken" in trip.describe()
    # Its failures are accounted for: two more elsewhere trip nothing, a third does.
    assert state.failed(_workspace_failure("/srv/b", "t4")) is None
    assert state.failed(_workspace_failure("/srv/c", "t5")) is None
    assert state.failed(_workspace_failure("/srv/a", "t9")) is None  # a failed probe
    board = state.failed(_workspace_failure("/srv/c", "t6"))
    assert board is not None and board.scope == "board:b" and board.tasks == ["b/t4", "b/t5",
                                                                               "b/t6"]
    assert state.failed(_workspace_failure("/srv/d", "t7")) is None  # the board is broken


def test_a_success_in_one_workspace_forgets_only_its_own_failures(tmp_path: Path) -> None:
    state = breaker.Breaker(tmp_path / "breaker.json", threshold=3, window=60, probe_interval=100)
    for task in ("t1", "t2"):
        state.failed(_workspace_failure("/srv/a", task))
    assert not state.succeeded("workspace:b:/srv/b", "board:b")
    trip = state.failed(_workspace_failure("/srv/a", "t3"))
    assert trip is not None and trip.scope == "workspace:b:/srv/a"
    # A probe's success clears its workspace and a board trip it was the probe of.
    assert state.succeeded("workspace:b:/srv/a", "board:b") and state.trips() == {}


def test_the_workspaces_a_claim_skips_are_those_of_its_board_not_due_a_probe(
    tmp_path: Path,
) -> None:
    state = breaker.Breaker(tmp_path / "breaker.json", threshold=1, window=60, probe_interval=100)
    state.failed(_workspace_failure("/srv/a:x", "t1", at=0))
    state.failed(_workspace_failure("/srv/b", "t2", at=50))
    other = breaker.Failure(breaker.workspace_scope("c", "/srv/c"), "f", "c/t3", "boom", 0)
    state.failed(other)
    state.failed(breaker.Failure("provider:codex", "f", "b/t4", "boom", 0))
    assert state.broken_workspaces("b", 10) == {"/srv/a:x", "/srv/b"}
    assert state.broken_workspaces("b", 120) == {"/srv/b"}  # /srv/a:x's probe is due
    assert state.broken_workspaces("c", 10) == {"/srv/c"}
    assert breaker.workspace_of("workspace:b:/srv/a:x", "b") == "/srv/a:x"
    assert breaker.workspace_of("workspace:bb:/srv/a", "b") is None
    trips = state.trips()
    assert breaker.holding(trips, "b", "/srv/b") is trips["workspace:b:/srv/b"]
    assert breaker.holding(trips, "b", "/srv/c") is None
    assert breaker.holding(trips, "b", None) is None


# -- a real daemon -------------------------------------------------------------------

#: One run at a time, failed tasks backing off for an hour, a breaker of three tasks that
#: nothing but the test clears: what the daemon does is in the order the test expects.
STORM: dict[str, object] = {
    "concurrency": 1,
    "failure_backoff_base": 3600.0,
    "failure_backoff_max": 3600.0,
    "breaker_threshold": 3,
    "breaker_window": 3600.0,
    "breaker_probe_interval": 7200.0,
}


def test_ten_tasks_failing_the_same_way_stop_at_the_breaker_threshold(lane: Lane) -> None:
    """Ten tasks in two repositories whose before_run hook fails the same way (a tool
    missing from the host): without the breaker each would fail its whole budget (30
    counted failures, ten tasks gave_up); with it, claims from the board stop after
    three (the failure spans both workspaces: the board's hook is broken), status,
    doctor and the metrics say why, and ``health clear`` after the fix lets the others
    run."""
    port = free_port()
    lane.write_config(
        **STORM,
        failure_limit=3,
        metrics_port=port,
        # Each failure is worded with its own pid, as a real one is: one fingerprint still.
        hooks={"*": {"before_run": 'echo "lint: command not found (pid $$)" >&2; exit 127'}},
    )
    other = lane.new_repo("other")
    tasks = [lane.add(f"task {index}", workspace=(lane.repo, other)[index % 2])
             for index in range(10)]
    daemon = lane.start()

    def held() -> bool:
        hold = json_of(lane.cli("status", "--json"))["daemon"]["hold"]  # type: ignore[index]
        return bool(hold) and hold["kind"] == "breaker"  # type: ignore[index]

    lane.wait(held, what="claims held by the breaker")
    failed = [task for task in lane.tasks() if task.failure_count]
    assert sum(task.failure_count for task in lane.tasks()) == 3 and len(failed) == 3
    assert all(task.status is Status.READY for task in lane.tasks())  # none gave up
    assert all(task.next_attempt_at is not None for task in failed)  # each backs off
    state = json_of(lane.cli("status", "--json"))
    assert [trip["scope"] for trip in state["breaker"]] == [f"board:{BOARD}"]  # type: ignore[index]
    assert state["breaker"][0]["count"] == 3  # type: ignore[index]
    backing = state["boards"][BOARD]["backing_off"]  # type: ignore[index]
    assert sorted(b["task_id"] for b in backing) == sorted(t.id for t in failed)
    shown = lane.cli("task", "show", failed[0].id)
    assert "backing off (after 1 counted failure(s))" in shown.stdout
    doctor = lane.cli("doctor", "--json")
    assert doctor.returncode == 1
    checks = {c["name"]: c for c in json_of(doctor)["checks"]}  # type: ignore[attr-defined]
    assert checks[f"breaker board:{BOARD}"]["level"] == "fail"
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    assert f'lane_runner_broken{{scope="board:{BOARD}"}} 1.0' in metrics
    assert 'lane_runner_claims_held{reason="breaker"} 1.0' in metrics
    # The next attempt of a failed task will be told what went wrong.
    assert "lint: command not found" in lane.lane_state(failed[0].id)["retry_reason"]  # type: ignore[operator]

    lane.write_config(hooks={})  # the operator installs the tool...
    daemon.send_signal(signal.SIGHUP)
    cleared = lane.cli("health", "clear", f"board:{BOARD}", "--json")  # ...and clears it
    assert cleared.returncode == 0, cleared.stderr
    assert [t["scope"] for t in json_of(cleared)["cleared"]] == [f"board:{BOARD}"]  # type: ignore[index]
    untouched = {task.id for task in tasks} - {task.id for task in failed}
    lane.wait(
        lambda: all(lane.board.get_task(t).status is Status.DONE for t in untouched),
        timeout=120,
        what="the tasks the breaker kept back to run once cleared",
    )
    assert all(lane.board.get_task(t).failure_count == 0 for t in untouched)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_broken_workspace_holds_its_own_tasks_and_the_board_works_on(lane: Lane) -> None:
    """One repository lacks what the board's before_run hook checks for: after three of its
    tasks failed, the claim passes over its other tasks (no run, no counted failure), the
    other repository's tasks all run, status, doctor and the metrics name the
    workspace, and clearing it lets its tasks run."""
    port = free_port()
    lane.write_config(
        **STORM,
        metrics_port=port,
        hooks={"*": {"before_run": 'test -e .lint-ok || { echo "no lint config" >&2; exit 3; }'}},
    )
    working = lane.new_repo("working", {".lint-ok": ""})
    broken = [lane.add(f"broken {index}", priority=1) for index in range(5)]
    fine = [lane.add(f"fine {index}", workspace=working) for index in range(4)]
    daemon = lane.start()
    lane.wait(
        lambda: all(lane.board.get_task(t.id).status is Status.DONE for t in fine),
        timeout=120,
        what="the working repository's tasks, run although the other is broken",
    )
    where = f"workspace:{BOARD}:{lane.repo}"
    assert list(breaker.read(lane.home.breaker_file)) == [where]
    now = [lane.board.get_task(task.id) for task in broken]
    assert sorted(task.failure_count for task in now) == [0, 0, 1, 1, 1]
    assert all(task.status is Status.READY for task in now)
    untouched = [task for task in now if task.failure_count == 0]
    assert all(lane.runs(task.id) == [] for task in untouched)  # never claimed
    shown = json_of(lane.cli("task", "show", untouched[0].id, "--json"))["held"]
    assert shown["scope"] == where  # type: ignore[index]
    shown_text = lane.cli("task", "show", untouched[0].id).stdout
    assert "not claimed by this runner: workspace" in shown_text
    assert json_of(lane.cli("task", "show", fine[0].id, "--json"))["held"] is None
    state = json_of(lane.cli("status", "--json"))
    assert [trip["scope"] for trip in state["breaker"]] == [where]  # type: ignore[index]
    assert f"workspace {lane.repo} of board {BOARD} is marked broken" in (
        state["breaker"][0]["why"]  # type: ignore[index]
    )
    checks = {c["name"]: c for c in json_of(lane.cli("doctor", "--json"))["checks"]}  # type: ignore[attr-defined]
    assert checks[f"breaker {where}"]["level"] == "fail"
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    assert f'lane_runner_broken{{scope="{where}"}} 1.0' in metrics

    (lane.repo / ".lint-ok").write_text("")  # the operator fixes the repository...
    git("add", ".", cwd=lane.repo)
    git("commit", "-qm", "lint config", cwd=lane.repo)
    assert lane.cli("health", "clear", where).returncode == 0  # ...and clears it
    lane.wait(
        lambda: all(lane.board.get_task(t.id).status is Status.DONE for t in untouched),
        timeout=120,
        what="the tasks the broken workspace held back, run once it is cleared",
    )
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_workspace_gone_from_its_disk_blocks_three_tasks_not_all(lane: Lane) -> None:
    """A repository that cannot be prepared blocks its task (capability) at once, without a
    counted failure; without the breaker a runner would block every task of it, one
    claim each. With it, after three the others wait ready for the repository."""
    lane.write_config(**STORM)
    gone = lane.root / "unmounted"
    tasks = [lane.add(f"task {index}", workspace=gone) for index in range(6)]
    lane.add("elsewhere", priority=-1)
    daemon = lane.start()
    lane.wait(lambda: lane.board.get_task(lane.tasks()[-1].id).status is Status.DONE,
              what="the task of a working repository, claimed after the broken ones")
    statuses = sorted(lane.board.get_task(task.id).status.value for task in tasks)
    assert statuses == ["blocked"] * 3 + ["ready"] * 3
    trips = breaker.read(lane.home.breaker_file)
    assert list(trips) == [f"workspace:{BOARD}:{gone}"]
    assert "does not exist" in trips[f"workspace:{BOARD}:{gone}"].reason
    daemon.send_signal(signal.SIGTERM)  # before the clear: it would claim the others again
    assert daemon.wait(timeout=30) == 0
    blocked = [t.id for t in tasks if lane.board.get_task(t.id).status is Status.BLOCKED]
    cleared = lane.cli("health", "clear", f"workspace:{BOARD}:{gone}").stdout
    assert all(f"{BOARD}/{task}" in cleared for task in blocked) and "task retry" in cleared


def test_a_batch_ends_when_what_is_left_waits_for_a_broken_workspace(lane: Lane) -> None:
    """``run --until-idle`` waited on forever for the tasks the breaker held back; it
    ends once nothing else is left, and says which tasks it left waiting."""
    lane.write_config(**STORM)
    gone = lane.root / "unmounted"
    tasks = [lane.add(f"task {index}", workspace=gone) for index in range(5)]
    batch = lane.cli("run", "--until-idle", timeout=60)
    assert batch.returncode == 4, batch.stderr  # three blocked (and two left waiting)
    assert "2 task(s) held back by the storm breaker" in batch.stderr
    statuses = sorted(lane.board.get_task(task.id).status.value for task in tasks)
    assert statuses == ["blocked"] * 3 + ["ready"] * 2


def test_clearing_what_is_not_broken_says_what_is(lane: Lane) -> None:
    refused = lane.cli("health", "clear", "provider:codex")
    assert refused.returncode == 2 and "is not marked broken" in refused.stderr
    assert lane.cli("health", "show").stdout.strip() == "nothing marked broken"


def test_a_provider_failing_every_task_the_same_way_is_routed_around(lane: Lane) -> None:
    """codex crashes on every task (a broken install): after three tasks it is marked broken,
    and the other seven fall back to claude at once, without a counted failure each."""
    lane.write_config(**STORM)
    tasks = [
        lane.add(f"task {index}", body="[sim@codex:crash]", assignee="cli-codex-low")
        for index in range(10)
    ]
    daemon = lane.start()
    lane.wait(
        lambda: sum(t.status is Status.DONE for t in lane.tasks()) == 7,
        timeout=120,
        what="the tasks after the trip to be done by claude",
    )
    assert sum(task.failure_count for task in lane.tasks()) == 3
    trips = breaker.read(lane.home.breaker_file)
    assert list(trips) == ["provider:codex"] and trips["provider:codex"].count == 3
    done = [task for task in tasks if lane.board.get_task(task.id).status is Status.DONE]
    for task in done:
        assert [a["provider"] for a in lane.lane_state(task.id)["attempts"]] == ["claude"]  # type: ignore[index]
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_successful_probe_clears_the_breaker(lane: Lane) -> None:
    """Nobody clears it: once the hook works again, the next probe's success does."""
    lane.write_config(
        **{**STORM, "breaker_threshold": 2, "breaker_probe_interval": 1.0},
        hooks={"*": {"before_run": "echo 'cannot reach the package mirror' >&2; exit 3"}},
    )
    tasks = [lane.add(f"task {index}") for index in range(10)]
    daemon = lane.start()
    lane.wait(lane.home.breaker_file.exists, what="the breaker to trip")
    lane.write_config(hooks={})  # the mirror is back
    daemon.send_signal(signal.SIGHUP)

    def settled() -> bool:
        fresh = [lane.board.get_task(task.id) for task in tasks]
        untouched = [task for task in fresh if task.failure_count == 0]
        return not lane.home.breaker_file.exists() and bool(untouched) and all(
            task.status is Status.DONE for task in untouched
        )

    lane.wait(settled, timeout=120, what="a probe to clear the breaker and the rest to run")
    assert "works again: its breaker is cleared" in (lane.root / "daemon.log").read_text()
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
