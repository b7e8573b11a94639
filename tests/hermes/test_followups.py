"""A Hermes task's accepted result gets its follow-ups once through a kill -9 (issue 42),
on the real hermes-agent package: the runner killed inside ``after_done`` while the
result waits in Hermes's ``review`` column, then recovered and swept, runs the hook again
where the run worked (Hermes's worktree, or the runner's own worktree of a ``dir:``
repository) with the same ``LANE_DELIVERY_ID``, comments once, and runs nothing again
after that; Hermes's worktree stays."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import orjson
import pytest

from lane_runner.board.hermes.board import HermesBoard
from lane_runner.board.hermes.store import HermesStore
from tests.hermes.conftest import HermesLane, repository

#: after_done records its key and where it ran, then (the first time) holds until
#: released; it fails each time, so its comment is owed too.
AFTER_DONE = (
    'echo "$LANE_DELIVERY_ID $PWD" >> {log}; '
    "[ -e {held} ] && exit 3; touch {held}; "
    "while [ ! -e {release} ]; do sleep 0.05; done; exit 3"
)


@pytest.fixture
def board(hermes_lane: HermesLane, monkeypatch: pytest.MonkeyPatch) -> Iterator[HermesBoard]:
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes_lane.hermes.path))
    with closing(HermesStore(f"hermes://{hermes_lane.hermes.path}")) as store:
        found = store.board("default")
        assert isinstance(found, HermesBoard)
        yield found


def swept(hermes_lane: HermesLane) -> list[str]:
    done = hermes_lane.cli("cleanup", "--json")
    assert done.returncode == 0, done.stderr
    followed = orjson.loads(done.stdout)["followed_up"]
    assert isinstance(followed, list)
    return followed


def killed_inside_after_done(
    hermes_lane: HermesLane, tmp_path: Path, kind: str
) -> tuple[str, Path]:
    """A task on a ``kind:`` workspace whose runner was killed -9 inside its after_done,
    the hook then let go (it ends, orphaned); the task's id and the hook's log."""
    hooked, held, release = tmp_path / "after_done.log", tmp_path / "held", tmp_path / "go"
    hermes_lane.write_config(review="off", hooks={"*": {
        "after_done": AFTER_DONE.format(log=hooked, held=held, release=release)}})
    task_id = hermes_lane.hermes.create(
        "t", "--assignee", "cli-codex-low", "--skill", "review", "--body", "do it",
        "--workspace", f"{kind}:{repository(tmp_path / 'repo')}",
    )
    daemon = hermes_lane.start()
    hermes_lane.wait(held.exists, 120, "after_done to begin")
    daemon.send_signal(signal.SIGKILL)
    assert daemon.wait(timeout=30) == -signal.SIGKILL
    release.touch()
    return task_id, hooked


@pytest.mark.parametrize("kind", ["worktree", "dir"])
def test_a_kill_9_inside_after_done_runs_it_again_once_where_the_run_worked(
    hermes_lane: HermesLane, board: HermesBoard, tmp_path: Path, kind: str
) -> None:
    task_id, hooked = killed_inside_after_done(hermes_lane, tmp_path, kind)
    assert hermes_lane.hermes.statuses([task_id]) == {task_id: "review"}
    assert hermes_lane.cli("recover").returncode == 0

    assert swept(hermes_lane) == [f"default/{task_id}"]
    place = Path(json.loads(hermes_lane.hermes.hermes("show", task_id, "--json"))
                 ["task"]["workspace_path"])
    worked = place if kind == "worktree" else hermes_lane.home.worktree("default", task_id)
    first, again = hooked.read_text().splitlines()
    assert first == again  # the same key, in the same place
    key, where = first.split(" ", 1)
    assert key.startswith(f"default/{task_id}/run-")
    assert Path(where).resolve() == worked.resolve()
    assert swept(hermes_lane) == []  # nothing owed any more: nothing runs again
    assert len(hooked.read_text().splitlines()) == 2
    said = [c.body for c in board.comments(task_id)
            if c.body.rstrip().endswith(f"Lane-Delivery: {key} after_done")]
    assert len(said) == 1
    assert worked.is_dir()  # Hermes's worktree (or the runner's own) is not removed
    assert hermes_lane.hermes.statuses([task_id]) == {task_id: "review"}


def test_a_result_reviewed_after_the_kill_had_its_follow_ups_first_and_once(
    hermes_lane: HermesLane, board: HermesBoard, tmp_path: Path
) -> None:
    """Restarted with the column served, the runner's reviewer claims the review the kill
    left: the implementer's after_done runs again (same key) before the review, the task
    ends done with the reviewer's run completing it, and a sweep runs nothing again."""
    task_id, hooked = killed_inside_after_done(hermes_lane, tmp_path, "worktree")
    assert hermes_lane.cli("recover").returncode == 0
    hermes_lane.write_config(review="auto")
    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes_lane.hermes.statuses([task_id]) == {task_id: "done"}
    first, again = hooked.read_text().splitlines()
    assert first == again
    assert swept(hermes_lane) == []
    assert len(hooked.read_text().splitlines()) == 2
    key = first.split(" ", 1)[0]
    said = [c.body for c in board.comments(task_id)
            if c.body.rstrip().endswith(f"Lane-Delivery: {key} after_done")]
    assert len(said) == 1


def test_a_result_sent_back_by_another_reviewer_after_the_kill_had_its_follow_ups_first(
    hermes_lane: HermesLane, board: HermesBoard, tmp_path: Path
) -> None:
    """The hold is released at the restart, so another runner's reviewer may send the
    result back before this runner's sweep finds it in review; the task is ready again
    (never swept: it is not in review or done) and this runner's implementer claims it.
    The first result's after_done runs again (its key) before the next run, whose own
    after_done follows: the next run's lane state would hold them no more."""
    task_id, hooked = killed_inside_after_done(hermes_lane, tmp_path, "worktree")
    assert hermes_lane.cli("recover").returncode == 0
    review = board.claim_review("another-runner", 60)
    assert review is not None and review.task.id == task_id
    board.end_review(review.run.id, False, "not yet", ["the change needs a test"])
    assert hermes_lane.hermes.statuses([task_id]) == {task_id: "ready"}

    assert hermes_lane.start("--until-idle").wait(timeout=300) == 0
    assert hermes_lane.hermes.statuses([task_id]) == {task_id: "review"}
    first, again, then = hooked.read_text().splitlines()  # caught: the first key once
    assert first == again  # the first result's, before the next run began
    assert then.split(" ", 1)[0] != first.split(" ", 1)[0]  # the next run's own
    assert swept(hermes_lane) == []
    assert len(hooked.read_text().splitlines()) == 3
