"""A result sent to Hermes's review column is held while its implementer's follow-ups
run (issue 42), on the real hermes-agent package: no runner's reviewer claims it while
``after_done`` (or the push) still works in the task's workspace; the hold ends with the
follow-ups, or with the runner's restart when it was killed among them."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from lane_runner.board.hermes.board import HermesBoard
from lane_runner.board.hermes.store import HermesStore
from tests.hermes.conftest import HermesLane, repository
from tests.hermes.test_review_crash import expire_claim

OTHER = "another-runner"  # a second runner's node, claiming as Hermes claims reviews


@pytest.fixture
def board(hermes_lane: HermesLane, monkeypatch: pytest.MonkeyPatch) -> Iterator[HermesBoard]:
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes_lane.hermes.path))
    with closing(HermesStore(f"hermes://{hermes_lane.hermes.path}")) as store:
        found = store.board("default")
        assert isinstance(found, HermesBoard)
        yield found


def in_after_done(hermes_lane: HermesLane, tmp_path: Path) -> tuple[str, Path]:
    """A task asking for review whose ``after_done`` waits while ``gate`` exists, run by
    a daemon (its column left alone) until the result is in review."""
    gate = tmp_path / "gate"
    gate.write_text("")
    hermes_lane.write_config(review="off", hooks={"*": {
        "after_done": f"while [ -e {gate} ]; do sleep 0.05; done"}})
    task_id = hermes_lane.hermes.create(
        "t", "--assignee", "cli-codex-low", "--skill", "review", "--body", "do it",
        "--workspace", f"dir:{repository(tmp_path / 'repo')}",
    )
    return task_id, gate


def test_a_review_is_not_claimed_while_its_implementers_follow_ups_run(
    hermes_lane: HermesLane, board: HermesBoard, tmp_path: Path
) -> None:
    task_id, gate = in_after_done(hermes_lane, tmp_path)
    daemon = hermes_lane.start("--until-idle")
    hermes_lane.wait(lambda: hermes_lane.hermes.statuses([task_id])[task_id] == "review",
                     120, "the result sent to review")
    assert board.claim_review(OTHER, 60) is None  # after_done still runs
    gate.unlink()
    assert daemon.wait(timeout=300) == 0
    claim = board.claim_review(OTHER, 60)  # the follow-ups ended: the hold with them
    assert claim is not None and claim.task.id == task_id


def test_a_hold_left_by_a_killed_runner_ends_with_its_restart(
    hermes_lane: HermesLane, board: HermesBoard, tmp_path: Path
) -> None:
    task_id, gate = in_after_done(hermes_lane, tmp_path)
    daemon = hermes_lane.start()
    hermes_lane.wait(lambda: hermes_lane.hermes.statuses([task_id])[task_id] == "review",
                     120, "the result sent to review")
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    assert board.claim_review(OTHER, 60) is None  # the dead run's lease has not run out
    assert hermes_lane.cli("recover").returncode == 0
    claim = board.claim_review(OTHER, 60)
    assert claim is not None and claim.task.id == task_id
    gate.unlink()


def test_a_hold_expires_with_its_runs_lease(
    hermes_lane: HermesLane, board: HermesBoard, tmp_path: Path
) -> None:
    """A runner killed among its follow-ups and never restarted: once the run's lease
    has run out, another runner's reviewer claims the review."""
    task_id, gate = in_after_done(hermes_lane, tmp_path)
    daemon = hermes_lane.start()
    hermes_lane.wait(lambda: hermes_lane.hermes.statuses([task_id])[task_id] == "review",
                     120, "the result sent to review")
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    assert board.claim_review(OTHER, 60) is None
    expire_claim(hermes_lane.hermes, task_id)
    claim = board.claim_review(OTHER, 60)
    assert claim is not None and claim.task.id == task_id
    gate.unlink()
