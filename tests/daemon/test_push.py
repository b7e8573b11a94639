"""A done task's branch pushed to a real bare repository (``push = "on_done"``, issue 31)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from journal import RetentionPolicy
from lane_runner.board.model import Status
from lane_runner.run import cleanup, followup, push, workspace
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import Services
from tests.daemon.test_executor import claim, services  # noqa: F401 - the fixture
from tests.harness import BOARD, Lane, git

POLICY = RetentionPolicy(max_age_seconds=30 * 86400, max_count=1024, max_bytes=128 << 20)


def bare_remote(lane: Lane, name: str = "origin") -> Path:
    remote = lane.root / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=lane.root)
    git("remote", "add", name, str(remote), cwd=lane.repo)
    return remote


def ref(repository: Path, name: str) -> str | None:
    said = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", name],
        cwd=repository, capture_output=True, text=True,
    )
    return said.stdout.strip() or None


def comments(lane: Lane, task_id: str) -> list[str]:
    """The comments' words, without the delivery key line of a follow-up's comment."""
    return [c.body.split("\n\nLane-Delivery: ")[0] for c in lane.board.comments(task_id)]


def run_until_idle(lane: Lane) -> None:
    assert lane.start("--until-idle").wait(timeout=120) == 0


def test_a_done_task_is_pushed_to_the_remote_and_said_so(lane: Lane) -> None:
    remote = bare_remote(lane)
    lane.write_config(push="on_done")
    task = lane.add("push me")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    branch = workspace.branch_name(BOARD, task.id)
    pushed = ref(remote, f"refs/heads/{branch}")
    assert pushed is not None and pushed == ref(lane.repo, f"refs/heads/{branch}")
    assert ref(lane.repo, "main") != pushed  # the result's commit, not the base
    run_id = lane.board.get_task(task.id).completed_run_id
    [said] = [c.body for c in lane.board.comments(task.id) if c.body.startswith("pushed")]
    assert said.startswith(f"pushed branch {branch} at {pushed[:12]} to origin\n\n"
                           f"Lane-Delivery: {BOARD}/{task.id}/run-{run_id}/")
    assert said.endswith(" push")
    state = lane.lane_state(task.id)["delivery"]
    assert isinstance(state, dict) and state["stage"] == "followed"


def test_a_worker_on_a_detached_head_has_its_result_pushed(lane: Lane) -> None:
    """The worker ran ``git checkout --detach`` and committed there: the remote gets the
    result's commit, the one the board and the comment name, not the branch's base."""
    remote = bare_remote(lane)
    lane.write_config(push="on_done")
    task = lane.add("detached", body="[sim:checkout:detach:commit]")
    run_until_idle(lane)
    branch = workspace.branch_name(BOARD, task.id)
    pushed = ref(remote, f"refs/heads/{branch}")
    [event] = [e for e in lane.board.events(task.id) if e.kind == "completed"]
    head = event.data["metadata"]["delivery"]["head"]
    assert pushed == head == ref(lane.repo, f"refs/heads/{branch}") != ref(lane.repo, "main")
    assert f"pushed branch {branch} at {head[:12]} to origin" in comments(lane, task.id)


def test_a_late_push_refuses_a_branch_moved_after_the_board_took_the_result(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """The runner stopped before its push; someone moved the repository's branch on (a
    person: a task moves only its own clone's, issue 47); the sweep's push pushes nothing
    and its comment names both commits: which one the remote gets is a person's call."""
    remote = bare_remote(lane)
    services.cfg = services.cfg.replace(push="on_done")
    task = lane.add("pushed late")
    done_before_its_follow_ups(services, lane, monkeypatch)
    branch = workspace.branch_name(BOARD, task.id)
    result = ref(lane.repo, f"refs/heads/{branch}")
    assert result is not None
    clone = lane.home.worktree(BOARD, task.id)
    git("commit", "-q", "--allow-empty", "-m", "later work", cwd=clone)
    assert ref(lane.repo, f"refs/heads/{branch}") == result  # in the task's clone only
    git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=clone)
    moved = ref(lane.repo, f"refs/heads/{branch}")
    assert moved is not None and moved != result
    assert cleanup.sweep(services, POLICY, time.time(), lambda: False).followed_up
    assert ref(remote, f"refs/heads/{branch}") is None
    [said] = [c for c in comments(lane, task.id) if c.startswith("push of branch")]
    assert f"branch {branch} is at {moved}, but the board recorded {result}" in said
    assert "neither is pushed" in said and "the result stands" in said


class Stop(BaseException):
    """The runner stopping dead at one point."""


def done_before_its_follow_ups(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """Run the next task to done and stop dead before its push and after_done."""

    def stop(*args: object) -> None:
        raise Stop

    with monkeypatch.context() as patch:
        patch.setattr(followup, "follow_up", stop)
        with pytest.raises(Stop):
            RunExecutor(services, claim(services, lane)).execute()


def test_a_push_is_never_forced_and_its_failure_leaves_the_task_done(lane: Lane) -> None:
    remote = bare_remote(lane)
    lane.write_config(push="on_done")
    task = lane.add("the remote moved on")
    branch = workspace.branch_name(BOARD, task.id)
    other = lane.root / "other"
    git("clone", "-q", str(lane.repo), str(other), cwd=lane.root)
    git("commit", "-q", "--allow-empty", "-m", "someone else's work", cwd=other)
    git("push", "-q", str(remote), f"HEAD:refs/heads/{branch}", cwd=other)
    theirs = ref(remote, f"refs/heads/{branch}")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    assert ref(remote, f"refs/heads/{branch}") == theirs  # not overwritten
    [said] = [c for c in comments(lane, task.id) if c.startswith("push of branch")]
    assert "failed" in said and "rejected" in said and "the result stands" in said


def test_a_missing_remote_is_a_comment_not_a_failure(lane: Lane) -> None:
    lane.write_config(push="on_done", push_remote="upstream")
    task = lane.add("nowhere to push")
    run_until_idle(lane)
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE and done.failure_count == 0
    [said] = [c for c in comments(lane, task.id) if c.startswith("push of branch")]
    assert "'upstream' does not appear to be a git repository" in said
    assert "after" not in said.split(":")[0]  # a permanent failure is not tried again


def test_an_unreachable_remote_is_tried_again_then_reported(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    git("remote", "add", "origin", f"http://127.0.0.1:{port}/repo.git", cwd=repo)
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return False

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    pushed = push.push(repo, "origin", "main", head, wait=wait)
    assert not pushed.ok and pushed.tries == push.TRIES
    assert waits == list(push.BACKOFF)
    assert push.transient(pushed.said)


def test_what_counts_as_transient() -> None:
    assert push.transient("fatal: unable to access 'https://x/': Could not resolve host: x")
    assert push.transient("error: RPC failed; HTTP 502 curl 22 The requested URL returned error")
    assert not push.transient(" ! [rejected]        b -> b (non-fast-forward)")
    assert not push.transient("remote: Permission to o/r.git denied to someone.")
