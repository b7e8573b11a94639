"""Eight runner processes claiming from one board: every task exactly once, on every backend."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from threading import Barrier, Thread

import pytest

from lane_runner.board.base import BoardUnavailable, Store
from lane_runner.board.model import NewTask, Status
from lane_runner.board.sqlite import SqliteStore

RUNNERS = 8
TASKS = 500


def _postgres(url: str) -> Store:
    from lane_runner.board.postgres.store import PostgresStore

    return PostgresStore(url, connections=2)


OPENERS: dict[str, Callable[[str], Store]] = {
    "sqlite": lambda boards: SqliteStore(Path(boards)),
    "postgres": _postgres,
}


def claim_until_empty(backend: str, location: str, node: str, start: Barrier) -> None:
    """One runner: its own store and connection, claiming until nothing is left."""
    store = OPENERS[backend](location)
    try:
        board = store.board("race")
        start.wait()
        while True:
            try:
                if board.claim(node, 600, "cli-auto") is None:
                    return
            except BoardUnavailable:
                # The wait budget ran out under contention: the daemon rests such a
                # board and comes back, and so does this runner.
                time.sleep(0.05)
            time.sleep(0.001)  # a runner works between claims; without it one may starve the rest
    finally:
        store.close()


@pytest.fixture(params=sorted(OPENERS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """The backend's name and where its boards live (a directory or a database URL)."""
    if request.param == "postgres":
        return request.param, request.getfixturevalue("postgres_database")
    return request.param, str(tmp_path / "boards")


def test_every_task_is_claimed_exactly_once(backend: tuple[str, str]) -> None:
    name, location = backend
    setup = OPENERS[name](location)
    board = setup.create_board("race")
    for index in range(TASKS):
        board.add_task(NewTask(title=f"task {index}", id=f"t{index:03d}"))
    setup.close()  # no connection or pool thread crosses the fork
    context = multiprocessing.get_context("fork")
    start = context.Barrier(RUNNERS)  # all runners open their store, then race
    runners = [
        context.Process(target=claim_until_empty, args=(name, location, f"n{i}", start))
        for i in range(RUNNERS)
    ]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(timeout=240)
        assert runner.exitcode == 0

    store = OPENERS[name](location)
    board = store.board("race")
    tasks = board.list_tasks()
    assert {task.status for task in tasks} == {Status.RUNNING}
    runs = [run for task in tasks for run in board.runs(task.id)]
    assert len(runs) == TASKS  # one run per task: nobody claimed a task twice
    assert {run.task_id for run in runs} == {task.id for task in tasks}
    assert len({run.id for run in runs}) == TASKS
    by_id = sorted(runs, key=lambda run: run.id)
    if name == "sqlite":  # one claim at a time: ids and times in claim order, no gap
        assert [run.id for run in by_id] == list(range(1, TASKS + 1))
        assert [run.claimed_at for run in by_id] == sorted(run.claimed_at for run in by_id)
    # Oldest first, up to the claims in flight: a claim takes the oldest ready task no
    # other claim holds, so the k-th claim to commit passed over at most RUNNERS - 1
    # older tasks (the ones other runners were claiming at that moment). One claimer at
    # a time (SQLite's write lock) is exactly oldest first.
    positions = [int(run.task_id[1:]) for run in by_id]
    assert all(position <= k + RUNNERS - 1 for k, position in enumerate(positions))
    if name == "sqlite":
        assert positions == sorted(positions)
    assert len({run.node for run in runs}) > 1
    store.close()


PAIRS = 40
RESULT = {"status": "completed", "summary": "ok", "changed_files": []}


def test_parents_completing_at_once_promote_their_child_once(
    backend: tuple[str, str],
) -> None:
    """Each child waits on two parents whose runs two runners complete at the same moment.

    Each completion reads the other parent's status to decide the promotion: were that
    read not ordered by the board lock, both could see the other still running and the
    child would wait forever.
    """
    name, location = backend
    setup = OPENERS[name](location)
    board = setup.create_board("race")
    for index in range(PAIRS):
        parents = (f"a{index:02d}", f"b{index:02d}")
        for parent in parents:
            board.add_task(NewTask(title=parent, id=parent, assignee="cli-auto"))
        board.add_task(NewTask(title=f"child {index}", id=f"c{index:02d}", parents=parents))
    runs: dict[str, list[int]] = {"a": [], "b": []}
    while (claim := board.claim("setup", 600, "cli-auto")) is not None:
        runs[claim.task.id[0]].append(claim.run.id)
    setup.close()

    start = Barrier(2)

    def complete_all(side: str) -> None:
        store = OPENERS[name](location)
        try:
            mine = store.board("race")
            for run_id, _ in zip(runs[side], range(PAIRS), strict=True):
                start.wait()  # pair by pair: both parents of one child at once
                mine.complete(run_id, RESULT, "done")
        finally:
            store.close()

    threads = [Thread(target=complete_all, args=(side,)) for side in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()

    store = OPENERS[name](location)
    board = store.board("race")
    children = [task for task in board.list_tasks() if task.id.startswith("c")]
    assert {task.status for task in children} == {Status.READY}
    promoted = [event.task_id for event in board.events() if event.kind == "promoted"]
    assert sorted(promoted) == sorted(task.id for task in children)  # once each
    store.close()
