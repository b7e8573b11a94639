"""PostgreSQL's server-side transitions agree with the reference, step by step.

``board/postgres/transitions.py`` restates claim, heartbeat and completion in PL/pgSQL;
``board/sql/`` is the reference (and SQLite's implementation). One random
sequence of operations (stale and unknown run ids, parents, assignees, pauses,
replays) runs on two boards at once, each in a database of its own (run ids come
from one sequence per database): through the reference
(``server_transitions=False``) and through the functions. Every answer, and after
every step every task, run and event of the two boards, must be the same. (SQLite
is left out: it hands out no run id to a claim the pause refused, where PostgreSQL
skips one, and the contract allows both.)
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lane_runner.board.base import Board, Store
from lane_runner.board.model import BlockKind, Claim, NewTask, Outcome
from lane_runner.errors import UsageError
from tests.board.conftest import FAILURE_LIMIT, Clock

ASSIGNEES = (None, "cli-auto", "cli-codex-low")
RESULTS = ({"status": "completed", "n": 1}, {"n": 2, "status": "completed"}, {"n": 3})
PICK = st.integers(0, 6)
EXAMPLES = itertools.count()
WORKSPACES = (None, "/srv/a", "/srv/b")
# A claim may be told to skip workspaces (the storm breaker's broken ones).
CLAIM = st.tuples(
    st.just("claim"), st.sampled_from(["", "cli-auto"]),
    st.frozensets(st.sampled_from(WORKSPACES[1:])),
)
COMPLETE = st.tuples(
    st.just("complete"), st.integers(0, 1) | PICK, st.integers(0, 2), st.booleans()
)
# Claims and completions (the functions) are drawn three times as often as the rest.
OPERATION = st.one_of(
    CLAIM, CLAIM, COMPLETE, COMPLETE,
    st.tuples(st.just("add"), st.lists(PICK, max_size=2), st.integers(0, 2),
              st.sampled_from(ASSIGNEES), st.sampled_from(WORKSPACES)),
    CLAIM,
    st.tuples(st.just("heartbeat"), PICK),
    COMPLETE,
    st.tuples(st.just("block"), PICK),
    st.tuples(st.just("reclaim"), PICK, st.booleans()),
    st.tuples(st.just("unblock"), PICK),
    st.tuples(st.just("archive"), PICK),
    st.tuples(st.just("pause"), st.booleans()),
    st.tuples(st.just("tick"), st.floats(0.5, 120)),
)


@pytest.fixture
def stores(new_postgres_database: Callable[[], str]) -> Iterator[dict[str, Store]]:
    from lane_runner.board.postgres.store import PostgresStore

    clock = Clock()
    opened: dict[str, Store] = {
        "reference": PostgresStore(
            new_postgres_database(), failure_limit=FAILURE_LIMIT, clock=clock,
            server_transitions=False,
        ),
        "functions": PostgresStore(
            new_postgres_database(), failure_limit=FAILURE_LIMIT, clock=clock
        ),
    }
    opened["clock"] = clock  # type: ignore[assignment]
    yield opened
    for name, store in opened.items():
        if name != "clock":
            store.close()


class Sequence:
    """One example: a fresh board of the same name on each store."""

    def __init__(self, stores: dict[str, Store], slug: str) -> None:
        self.clock: Clock = stores["clock"]  # type: ignore[assignment]
        self.boards: dict[str, Board] = {}
        for name, store in stores.items():
            if name != "clock":
                self.boards[name] = store.create_board(slug)
        self.tasks: list[str] = []
        self.runs: list[int] = []

    def run_id(self, pick: int) -> int:
        if not self.runs or pick == 6:
            return 9_999
        return self.runs[-1 - pick % len(self.runs)]

    def task_id(self, pick: int) -> str:
        return self.tasks[pick % len(self.tasks)] if self.tasks else "t-none"

    def apply(self, operation: tuple[Any, ...]) -> None:
        kind = operation[0]
        if kind == "tick":
            self.clock.advance(operation[1])
            return
        if kind == "add":
            task_id = f"t{len(self.tasks)}"
            self.tasks.append(task_id)
        answers = {name: self._answer(board, operation) for name, board in self.boards.items()}
        assert answers["functions"] == answers["reference"], operation
        if kind == "claim" and isinstance(answers["reference"], tuple):
            self.runs.append(answers["reference"][2]["id"])
        self.compare()

    def _answer(self, board: Board, operation: tuple[Any, ...]) -> Any:
        try:
            return self._do(board, operation)
        except UsageError as error:
            return ("refused", str(error).replace(board.slug, "?"))

    def _do(self, board: Board, operation: tuple[Any, ...]) -> Any:
        kind, *args = operation
        actions: dict[str, Callable[..., Any]] = {
            "add": lambda parents, priority, assignee, workspace: board.add_task(NewTask(
                title="t", id=self.tasks[-1], priority=priority, assignee=assignee,
                parents=tuple(self.task_id(p) for p in parents if self.tasks[:-1]),
                workspace=workspace,
            )),
            "claim": lambda default, skip: board.claim("node", 60.0, default, skip),
            "heartbeat": lambda pick: board.heartbeat(self.run_id(pick), 60.0),
            "complete": lambda pick, result, metadata: board.complete(
                self.run_id(pick), RESULTS[result], "ok", {"model": "m"} if metadata else None
            ),
            "block": lambda pick: board.block(self.run_id(pick), "stuck", BlockKind.NEEDS_INPUT),
            "reclaim": lambda pick, count: board.reclaim(
                self.run_id(pick), "lost", Outcome.EXPIRED, count_failure=count
            ),
            "unblock": lambda pick: board.unblock(self.task_id(pick)),
            "archive": lambda pick: board.archive(self.task_id(pick)),
            "pause": lambda pause: board.pause("p", "op") if pause else board.resume(),
        }
        return _comparable(actions[kind](*args))

    def compare(self) -> None:
        states = {name: _state(board) for name, board in self.boards.items()}
        assert states["functions"] == states["reference"]


def _comparable(value: Any) -> Any:
    """An answer without what names its board."""
    if isinstance(value, Claim):
        return ("claim", _plain(value.task), _plain(value.run))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(value)
    return value


def _plain(record: Any) -> dict[str, Any]:
    fields = dataclasses.asdict(record)
    fields.pop("board", None)
    return fields


def _state(board: Board) -> tuple[Any, ...]:
    tasks = [_plain(task) for task in board.list_tasks()]
    runs = [_plain(run) for task in board.list_tasks() for run in board.runs(task.id)]
    events = [(e.task_id, e.kind, e.run_id, e.at, e.data) for e in board.events()]
    return tasks, runs, events


# The stores are made once per test and shared by its examples; each example has boards
# of its own, so nothing carries over from one to the next.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_functions_agree_with_the_reference(stores: dict[str, Store], data: st.DataObject) -> None:
    sequence = Sequence(stores, f"a{next(EXAMPLES)}")
    first = data.draw(st.lists(st.tuples(st.just("add"), st.just([]), st.integers(0, 2),
                                         st.sampled_from(ASSIGNEES), st.sampled_from(WORKSPACES)),
                               min_size=2, max_size=4))
    for operation in first + data.draw(st.lists(OPERATION, min_size=5, max_size=30)):
        sequence.apply(operation)

