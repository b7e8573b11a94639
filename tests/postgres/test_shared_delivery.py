"""Two homes on one PostgreSQL board and one repository: a result is delivered once
(issue 48, item 1).

Runner A is SIGKILLed while a test's hold keeps it right after its commit, so its
result commit exists and its journal has no pending record. ``recover`` on A hands the run back;
runner B claims the task, takes A's worktree over and finds the result on the task's
branch, carried by A's commit: B delivers it without running the CLI and without a
second commit, the board's completed event names that commit and the base before it,
and A's next recovery clears the lane state that still held the result.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson

from lane_runner.board.model import NewTask, Outcome, Status
from lane_runner.run import delivery, workspace
from tests.harness import hold_commit

from .conftest import BOARD, Fleet


def commits(fleet: Fleet, *span: str, where: Path | None = None) -> list[str]:
    """The commits of ``span`` in the shared repository (or in ``where``, a task's clone)."""
    said = subprocess.run(
        ["git", "log", "--format=%H", *span], cwd=where or fleet.repo,
        capture_output=True, text=True, check=True,
    )
    return said.stdout.split()


def test_a_result_committed_by_a_killed_runner_is_delivered_once_by_another_home(
    fleet: Fleet,
) -> None:
    first, second = fleet.pod("home-a"), fleet.pod("home-b")
    started = fleet.root / "cli-started.jsonl"
    for pod in (first, second):
        pod.extra_env["LANE_RUNNER_SIM_STARTED_LOG"] = str(started)
    held, release = fleet.root / "commit-held", fleet.root / "commit-release"
    first.extra_env.update(hold_commit(held, release))
    [base] = commits(fleet, "-1", "main")
    task = fleet.board.add_task(NewTask(title="deliver me once", workspace=str(fleet.repo)))
    branch = workspace.branch_name(BOARD, task.id)

    first.start()
    fleet.wait(held.exists, timeout=120, what="home A's result commit")
    first.kill()
    release.touch()
    # Made in home A's clone of the task; recovery puts it on the repository's branch.
    [made] = commits(fleet, f"main..{branch}", where=first.home.worktree(BOARD, task.id))
    assert commits(fleet, f"main..{branch}") == []
    [run_a] = fleet.board.runs(task.id)
    assert run_a.node == first.node and run_a.ended_at is None
    accepted = orjson.loads((first.home.lane_dir(BOARD) / f"{task.id}.json").read_bytes())
    assert accepted["delivery"]["stage"] == "accepted"

    recovered = first.cli("recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert [ref["run_id"] for ref in orjson.loads(recovered.stdout)["reclaimed"]] == [run_a.id]

    assert second.start("--until-idle").wait(timeout=120) == 0, second.log_tail()
    assert len(started.read_text().splitlines()) == 1  # the CLI ran once, in home A
    assert commits(fleet, f"main..{branch}") == [made]
    done = fleet.board.get_task(task.id)
    assert done.status is Status.DONE
    runs = fleet.board.runs(task.id)
    assert [(run.node, run.outcome) for run in runs] == [
        (first.node, Outcome.RECLAIMED), (second.node, Outcome.COMPLETED),
    ]
    assert done.completed_run_id == runs[1].id
    assert done.result == accepted["delivery"]["result"]
    [event] = [e for e in fleet.board.events(task.id) if e.kind == "completed"]
    delivered = event.data["metadata"]["delivery"]
    assert (delivered["base"], delivered["commit"], delivered["commits"]) == (base, made, [made])
    assert delivered["head"] == made
    notes = [c.body for c in fleet.board.comments(task.id)]
    assert any(f"run {run_a.id}'s accepted result" in note for note in notes), notes
    message = subprocess.run(
        ["git", "log", "-1", "--format=%B", made], cwd=fleet.repo,
        capture_output=True, text=True, check=True,
    ).stdout
    assert f"Lane-Run: {run_a.id}\n" in message
    assert delivery.Carried.read(message) is not None

    reconciled = first.cli("recover", "--json")
    assert reconciled.returncode == 0, reconciled.stderr
    [ref] = orjson.loads(reconciled.stdout)["reconciled"]
    assert (ref["task_id"], ref["run_id"]) == (task.id, run_a.id)
    assert f"through run {runs[1].id}" in ref["reason"]
    state = orjson.loads((first.home.lane_dir(BOARD) / f"{task.id}.json").read_bytes())
    assert state["delivery"] is None
    assert orjson.loads(first.cli("recover", "--json").stdout)["reconciled"] == []
    fleet.assert_done_exactly_once()


def test_a_result_accepted_but_not_yet_committed_is_committed_by_recovery(
    fleet: Fleet,
) -> None:
    """Runner A is SIGKILLed after accepting its result and before committing it (once
    the worktree is staged): the result is in A's lane state alone. A's
    ``recover`` makes the result commit before it hands the run back, so runner B
    delivers it from the branch: the CLI runs once, one result commit."""
    first, second = fleet.pod("home-a"), fleet.pod("home-b")
    started = fleet.root / "cli-started.jsonl"
    for pod in (first, second):
        pod.extra_env["LANE_RUNNER_SIM_STARTED_LOG"] = str(started)
    held, release = fleet.root / "index-held", fleet.root / "index-release"
    first.extra_env.update(hold_commit(held, release, at="staging"))
    task = fleet.board.add_task(NewTask(title="commit me in recovery", workspace=str(fleet.repo)))
    branch = workspace.branch_name(BOARD, task.id)

    first.start()
    fleet.wait(held.exists, timeout=120, what="home A's staging of the result")
    first.kill()
    release.touch()
    assert commits(fleet, f"main..{branch}") == []
    accepted = orjson.loads((first.home.lane_dir(BOARD) / f"{task.id}.json").read_bytes())
    assert accepted["delivery"]["stage"] == "accepted"

    recovered = first.cli("recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    [made] = commits(fleet, f"main..{branch}")  # made by A's recovery, carrying the result

    assert second.start("--until-idle").wait(timeout=120) == 0, second.log_tail()
    assert len(started.read_text().splitlines()) == 1  # the CLI ran once, in home A
    assert commits(fleet, f"main..{branch}") == [made]
    done = fleet.board.get_task(task.id)
    assert done.status is Status.DONE and done.result == accepted["delivery"]["result"]
    fleet.assert_done_exactly_once()
