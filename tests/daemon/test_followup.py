"""Each follow-up step of an accepted result runs once; one cut short runs again with its
``LANE_DELIVERY_ID`` (issue 48).

A real daemon SIGKILLed while its ``after_done`` hook runs, a real bare remote whose
pushes the repository's ``pre-push`` hook counts, and in process a runner stopped dead
right after its push comment reached the board.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from journal import RetentionPolicy
from lane_runner.board.model import Outcome, Status
from lane_runner.board.sql.board import SqlBoard
from lane_runner.run import cleanup, lanestate, workspace
from lane_runner.run.executor import RunExecutor
from lane_runner.service import recovery
from lane_runner.service.services import Services
from tests.daemon.test_executor import claim, services  # noqa: F401 - the fixture
from tests.harness import BOARD, Lane, git

POLICY = RetentionPolicy(max_age_seconds=30 * 86400, max_count=1024, max_bytes=128 << 20)

#: after_done records its key, then (the first time) holds until the test released it.
AFTER_DONE = (
    'echo "$LANE_DELIVERY_ID" >> {log}; '
    "[ -e {held} ] && exit 0; touch {held}; "
    "while [ ! -e {release} ]; do sleep 0.05; done"
)
#: The remote's pre-receive hook counts every push that reaches it, with its key (the
#: runner's own git runs no hook of the task's repository; a local remote runs its own).
PRE_RECEIVE = '#!/bin/sh\necho "$LANE_DELIVERY_ID" >> {log}\n'


def bare_remote(lane: Lane) -> Path:
    remote = lane.root / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=lane.root)
    git("remote", "add", "origin", str(remote), cwd=lane.repo)
    return remote


def count_pushes(lane: Lane, remote: Path) -> Path:
    log = lane.root / "pushes.log"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(PRE_RECEIVE.format(log=log))
    hook.chmod(0o755)
    return log


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def follow_up_comments(board: SqlBoard, task_id: str) -> list[str]:
    return [c.body for c in board.comments(task_id) if "\n\nLane-Delivery: " in c.body]


def test_a_kill_9_during_after_done_runs_it_again_with_its_key_and_nothing_else_twice(
    lane: Lane,
) -> None:
    """The push and its comment ended before the kill: recovered, they are not repeated.
    after_done was cut short: it runs again, with the same LANE_DELIVERY_ID it had."""
    remote = bare_remote(lane)
    pushes = count_pushes(lane, remote)
    hooked, held, release = lane.root / "after_done.log", lane.root / "held", lane.root / "go"
    lane.write_config(push="on_done", hooks={"*": {
        "after_done": AFTER_DONE.format(log=hooked, held=held, release=release)
    }})
    task = lane.add("killed in after_done")
    daemon = lane.start()
    lane.wait(held.exists, what="after_done to begin")
    daemon.send_signal(signal.SIGKILL)
    assert daemon.wait(timeout=30) == -signal.SIGKILL
    release.touch()  # the orphaned hook ends (its process group outlived the daemon)
    assert lane.board.get_task(task.id).status is Status.DONE
    state = lane.lane_state(task.id)["delivery"]
    assert isinstance(state, dict) and state["stage"] == "journaled"
    assert state["steps"]["push"]["ended"] and not state["steps"]["after_done"]["ended"]

    recovered = lane.cli("recover")
    assert recovered.returncode == 0, recovered.stderr
    swept = lane.cli("cleanup", "--json")
    assert swept.returncode == 0, swept.stderr
    assert orjson.loads(swept.stdout)["followed_up"] == [f"{BOARD}/{task.id}"]

    keys = lines(hooked)
    run_id = lane.board.get_task(task.id).completed_run_id
    assert len(keys) == 2 and keys[0] == keys[1]
    assert keys[0].startswith(f"{BOARD}/{task.id}/run-{run_id}/")
    assert lines(pushes) == [keys[0]]  # one push, told the same key
    branch = workspace.branch_name(BOARD, task.id)
    [pushed] = follow_up_comments(lane.board, task.id)
    assert pushed.startswith(f"pushed branch {branch} at ")
    assert pushed.endswith(f"Lane-Delivery: {keys[0]} push")
    assert subprocess.run(["git", "rev-parse", "--verify", f"refs/heads/{branch}"],
                          cwd=remote, capture_output=True).returncode == 0
    assert lane.lane_state(task.id)["delivery"]["stage"] == "followed"  # type: ignore[index]


def push_and_after_done_counted(services: Services, lane: Lane) -> tuple[Path, Path]:  # noqa: F811
    """Push on done to a bare remote and an after_done hook, each recording its key: the
    two logs."""
    pushes = count_pushes(lane, bare_remote(lane))
    hooked = lane.root / "after_done.log"
    services.cfg = services.cfg.replace(push="on_done", hooks={"*": {
        "after_done": f'echo "$LANE_DELIVERY_ID" >> {hooked}'
    }})
    return pushes, hooked


class Stop(BaseException):
    """The runner stopping dead at one point (what a kill -9 leaves, in process)."""


def test_a_comment_cut_short_after_it_reached_the_board_is_not_written_twice(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """The runner dies after the board took the push comment and before its end was saved:
    the sweep finds the comment's key on the board and does not write it again, nor push
    again; after_done, which never began, runs once."""
    pushes, hooked = push_and_after_done_counted(services, lane)
    task = lane.add("dies after its comment")
    original = SqlBoard.comment

    def comment_then_die(board: SqlBoard, task_id: str, body: str, author: str = "x") -> object:
        written = original(board, task_id, body, author)
        if "\n\nLane-Delivery: " in body:
            raise Stop
        return written

    with monkeypatch.context() as patch:
        patch.setattr(SqlBoard, "comment", comment_then_die)
        with pytest.raises(Stop):
            RunExecutor(services, claim(services, lane)).execute()
    assert len(follow_up_comments(lane.board, task.id)) == 1 and lines(hooked) == []

    report = cleanup.sweep(services, POLICY, time.time(), lambda: False)
    assert report.followed_up == [f"{BOARD}/{task.id}"]
    [said] = follow_up_comments(lane.board, task.id)
    assert said.startswith("pushed branch ")
    assert len(lines(pushes)) == 1 and lines(hooked) == lines(pushes)
    assert lane.lane_state(task.id)["delivery"]["stage"] == "followed"  # type: ignore[index]


@pytest.mark.parametrize("taken_up", [False, True], ids=["its-own", "an-earlier-runs"])
def test_a_result_recovery_finalized_before_its_state_said_so_is_still_followed_up(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
    taken_up: bool,
) -> None:
    """The runner dies after its pending record and before its lane state said
    ``journaled`` (the crash campaign's find): recovery finalizes the record, so the task
    is done through the state's delivering run, and the push and after_done are still
    owed. Recovery keeps the state (it is not another home's delivery) and the sweep
    follows up. ``taken_up``: the delivering run took up an earlier run's result, whose
    runner stopped after its commit (``accepted_run`` is that earlier run)."""
    pushes, hooked = push_and_after_done_counted(services, lane)
    task = lane.add("dies between its pending record and its lane state")

    def stop(*args: object) -> None:
        raise Stop

    if taken_up:
        with monkeypatch.context() as patch:
            patch.setattr(services.journal, "write_pending", stop)
            with pytest.raises(Stop):
                RunExecutor(services, claim(services, lane)).execute()
        [run] = lane.board.runs(task.id)
        lane.board.reclaim(run.id, "the runner restarted", Outcome.RECLAIMED)

    with monkeypatch.context() as patch:
        patch.setattr(lanestate.LaneState, "journaled", stop)
        with pytest.raises(Stop):
            RunExecutor(services, claim(services, lane)).execute()
    assert lane.board.get_task(task.id).status is Status.RUNNING

    result = recovery.recover(services)
    assert result.reconciled == []
    assert lane.board.get_task(task.id).status is Status.DONE
    report = cleanup.sweep(services, POLICY, time.time(), lambda: False)
    assert report.followed_up == [f"{BOARD}/{task.id}"]
    assert len(lines(pushes)) == 1 and lines(hooked) == lines(pushes)
    assert lane.lane_state(task.id)["delivery"]["stage"] == "followed"  # type: ignore[index]
