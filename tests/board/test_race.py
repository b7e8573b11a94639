"""Eight runner processes claiming from one board: every task exactly once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from threading import Barrier

from lane_runner.board.model import NewTask, Status
from lane_runner.board.sqlite import SqliteStore

RUNNERS = 8
TASKS = 500


def claim_until_empty(boards: str, node: str, start: Barrier) -> None:
    """One runner: its own store and connection, claiming until nothing is left."""
    store = SqliteStore(Path(boards))
    try:
        board = store.board("race")
        start.wait()
        while board.claim(node, 600, "cli-auto") is not None:
            pass
    finally:
        store.close()


def test_every_task_is_claimed_exactly_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "boards")
    board = store.create_board("race")
    for index in range(TASKS):
        board.add_task(NewTask(title=f"task {index}", id=f"t{index:03d}"))
    context = multiprocessing.get_context("fork")
    start = context.Barrier(RUNNERS)  # all runners open their store, then race
    runners = [
        context.Process(target=claim_until_empty, args=(str(tmp_path / "boards"), f"n{i}", start))
        for i in range(RUNNERS)
    ]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(timeout=240)
        assert runner.exitcode == 0

    tasks = board.list_tasks()
    assert {task.status for task in tasks} == {Status.RUNNING}
    runs = [run for task in tasks for run in board.runs(task.id)]
    assert len(runs) == TASKS  # one run per task: nobody claimed a task twice
    assert {run.task_id for run in runs} == {task.id for task in tasks}
    assert sorted(run.id for run in runs) == list(range(1, TASKS + 1))
    by_id = sorted(runs, key=lambda run: run.id)
    assert [run.claimed_at for run in by_id] == sorted(run.claimed_at for run in by_id)
    claimed_order = [run.task_id for run in by_id]
    assert claimed_order == sorted(claimed_order)  # oldest first, across all runners
    assert len({run.node for run in runs}) > 1
    store.close()
