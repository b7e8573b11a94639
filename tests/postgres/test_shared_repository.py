"""Three runners, their own homes, one PostgreSQL board and ONE workspace repository.

One runner is SIGKILLed for good mid-run. Its clones stay registered in the shared
repository and keep working on their tasks' branches; the runs it held come
back through their expired leases, and the runner that claims each one next
takes the dead runner's worktree over instead of blocking the task.
"""

from __future__ import annotations

from pathlib import Path

from lane_runner.board.model import NewTask, Outcome
from lane_runner.run import taskgit

from .conftest import Fleet, Pod

TASKS = 90
SLOW = "[sim:slow:0.15:6]"  # about a second of provider work: runs are in flight when killed


def test_a_dead_runner_s_worktrees_are_taken_over(fleet: Fleet) -> None:
    first, second, doomed = fleet.pod("home1"), fleet.pod("home2"), fleet.pod("home3")
    for index in range(TASKS):
        body = SLOW if index % 2 == 0 else ""
        fleet.board.add_task(
            NewTask(title=f"task {index}", body=body, workspace=str(fleet.repo))
        )
    survivors = [first.start("--until-idle"), second.start("--until-idle")]
    doomed.start()
    fleet.wait(
        lambda: fleet.done() >= 15
        and len(fleet.board.running_runs(doomed.node)) >= 2
        and bool(holding_branches(fleet.repo, doomed)),
        timeout=120,
        what="home3 to be mid-run with a task's branch checked out",
    )
    doomed.kill()
    killed_in_flight = {run.task_id for run in fleet.board.running_runs(doomed.node)}
    # A run killed before its worktree was made leaves no branch to take over.
    held = holding_branches(fleet.repo, doomed) & killed_in_flight
    assert held

    for daemon in survivors:
        assert daemon.wait(timeout=240) == 0, first.log_tail() + second.log_tail()

    assert fleet.board.counts()["blocked"] == 0
    assert not [e for e in fleet.board.events() if e.kind == "blocked"]
    fleet.assert_done_exactly_once()
    rescued = {
        run.task_id
        for task_id in killed_in_flight
        for run in fleet.board.runs(task_id)
        if run.node == doomed.node and run.outcome is Outcome.EXPIRED
    }
    assert rescued == killed_in_flight
    for task_id in held:
        notes = [c.body for c in fleet.board.comments(task_id)]
        assert any("took over the worktree" in note for note in notes), (task_id, notes)
    for task_id in rescued:
        assert not doomed.home.worktree("shared", task_id).exists()
        survivors_worktrees = [pod.home.worktree("shared", task_id) for pod in (first, second)]
        assert [path.is_dir() for path in survivors_worktrees].count(True) == 1, task_id


def holding_branches(repo: Path, pod: Pod) -> set[str]:
    """The tasks whose branch one of ``pod``'s clones works on, as the repository's
    registry of its tasks' clones names them (``run/taskgit.py``)."""
    home = str(pod.root.resolve())
    return {
        entry.branch.rpartition("/")[2]
        for entry in taskgit.entries(repo / ".git")
        if str(entry.worktree.resolve()).startswith(home)
        and entry.branch.startswith("lane/shared/")
        and entry.worktree.is_dir()
    }
