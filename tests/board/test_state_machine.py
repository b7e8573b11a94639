"""Random operation sequences, including stale and unknown run ids, keep the board's invariants.

The same machine runs on every backend of ``tests/board/conftest.py``, so the
drift the two backends once had (archived parents, the order children are
promoted in) would show as a failing example. On Hermes the rules run where they
apply (``BoardMachine.on_hermes``); tasks and archives come from Hermes's own calls
(``tests/board/hermes_backend.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from lane_runner.board.base import Store
from lane_runner.board.model import BlockKind, Event, NewTask, Outcome, Status
from lane_runner.board.rules import RECLAIM_OUTCOMES
from lane_runner.errors import UsageError
from tests.board.conftest import Clock, backend_of

RESULTS = st.sampled_from([{"status": "completed", "n": 1}, {"status": "completed", "n": 2}])
PICK = st.integers(min_value=0, max_value=5)
UNKNOWN = 5
# (examples, steps each): PostgreSQL pays a round trip per statement and Hermes a
# connection per call, so they run fewer, shorter sequences of the same rules; the
# contract suite covers them fully.
BUDGET = {"sqlite": (150, 40), "postgres": (20, 30), "pgbouncer": (20, 30), "hermes": (30, 30)}


class BoardMachine(RuleBasedStateMachine):
    """One example: a fresh board on the store the test opened."""

    store: Store
    clock: Clock
    slugs: itertools.count[int]
    #: Hermes: lane-runner does not unblock there, Hermes's archive also takes a running
    #: task, Hermes promotes children in its own order and keeps its own clock.
    on_hermes: bool

    def __init__(self) -> None:
        super().__init__()
        self.board = self.store.create_board(f"m{next(self.slugs)}")
        self.task_ids: list[str] = []
        self.run_ids: list[int] = []
        self.ended_at: dict[int, float] = {}
        self.seen_events: list[Event] = []

    def run_id(self, pick: int) -> int:
        """A recent run, an older (often stale) one, or one the board never issued."""
        if pick == UNKNOWN:
            return 10_000 + pick
        return self.run_ids[-1 - pick % len(self.run_ids)]

    @initialize(count=st.integers(1, 4))
    def some_tasks(self, count: int) -> None:
        for _ in range(count):
            self.add(parents=[], priority=0)

    def task_id(self, pick: int) -> str:
        return self.task_ids[pick % len(self.task_ids)]

    @rule(parents=st.lists(PICK, max_size=2), priority=st.integers(0, 2))
    def add(self, parents: list[int], priority: int) -> None:
        chosen = tuple(self.task_id(p) for p in parents) if self.task_ids else ()
        try:
            task = self.board.add_task(NewTask(title="t", parents=chosen, priority=priority))
        except UsageError:
            assert any(self.board.get_task(p).status is Status.ARCHIVED for p in chosen)
            return
        assert task.status is (Status.READY if self.all_done(chosen) else Status.TODO)
        self.task_ids.append(task.id)

    def all_done(self, parents: tuple[str, ...]) -> bool:
        return all(self.board.get_task(p).status is Status.DONE for p in parents)

    @rule(default=st.sampled_from(["cli-auto", ""]))
    def claim(self, default: str) -> None:
        claimed = self.board.claim("node", 60, default)
        if claimed is not None:
            assert claimed.run.id not in self.run_ids
            assert all(claimed.run.id > known for known in self.run_ids)
            self.run_ids.append(claimed.run.id)

    @precondition(lambda self: bool(self.run_ids))
    @rule(pick=PICK)
    def heartbeat(self, pick: int) -> None:
        run_id = self.run_id(pick)
        current = {t.current_run_id for t in self.board.list_tasks(Status.RUNNING)}
        assert self.board.heartbeat(run_id, 60) == (run_id in current)

    @precondition(lambda self: bool(self.run_ids))
    @rule(pick=PICK, result=RESULTS)
    def complete(self, pick: int, result: dict[str, object]) -> None:
        before = len(self.board.events())
        outcome = self.board.complete(self.run_id(pick), result, "summary")
        if outcome.committed:
            task = self.board.get_task(self.board.get_run(self.run_id(pick)).task_id)
            assert task.status is Status.DONE and task.result == result
        promoted = [e.task_id for e in self.board.events()[before:] if e.kind == "promoted"]
        if not self.on_hermes:  # hermes_backend.PROMOTION_ORDER
            assert promoted == sorted(promoted)  # children are promoted in task id order

    @precondition(lambda self: bool(self.run_ids))
    @rule(pick=PICK, kind=st.sampled_from(list(BlockKind)), counted=st.booleans())
    def block(self, pick: int, kind: BlockKind, counted: bool) -> None:
        self.board.block(self.run_id(pick), "blocked", kind, count_failure=counted)

    @precondition(lambda self: bool(self.run_ids))
    @rule(
        pick=PICK,
        outcome=st.sampled_from(sorted(RECLAIM_OUTCOMES)),
        counted=st.booleans(),
        cooldown=st.sampled_from([None, 0.0, 30.0]),
    )
    def reclaim(self, pick: int, outcome: Outcome, counted: bool, cooldown: float | None) -> None:
        self.board.reclaim(
            self.run_id(pick), "reclaimed", outcome, count_failure=counted, cooldown=cooldown
        )

    @precondition(lambda self: bool(self.task_ids) and not self.on_hermes)
    @rule(pick=PICK)
    def unblock(self, pick: int) -> None:
        task_id = self.task_id(pick)
        before = self.board.get_task(task_id)
        try:
            after = self.board.unblock(task_id)
        except UsageError:
            archived = [self.board.get_task(p).status is Status.ARCHIVED for p in before.parents]
            assert before.status is not Status.BLOCKED or any(archived)
            assert self.board.get_task(task_id) == before
            return
        assert after.status is (Status.READY if self.all_done(before.parents) else Status.TODO)

    @precondition(lambda self: bool(self.task_ids))
    @rule(pick=PICK)
    def archive(self, pick: int) -> None:
        task_id = self.task_id(pick)
        before = self.board.get_task(task_id)
        try:
            self.board.archive(task_id)
        except UsageError:
            assert before.status is Status.RUNNING
            assert self.board.get_task(task_id) == before

    @precondition(lambda self: not self.on_hermes)
    @rule(seconds=st.sampled_from([1.0, 45.0]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def runs_match_statuses_and_end_once(self) -> None:
        for task in self.board.list_tasks():
            runs = self.board.runs(task.id)
            for run in runs:
                if run.id in self.ended_at:
                    assert run.ended_at == self.ended_at[run.id]
                elif run.ended_at is not None:
                    self.ended_at[run.id] = run.ended_at
            open_runs = [run for run in runs if run.ended_at is None]
            if task.status is Status.RUNNING:
                assert [run.id for run in open_runs] == [task.current_run_id]
            else:
                assert task.current_run_id is None and open_runs == []
            completed = [run.id for run in runs if run.outcome is Outcome.COMPLETED]
            if task.status is Status.DONE:
                assert completed == [task.completed_run_id]
            elif task.status is Status.ARCHIVED:  # archiving keeps what a task achieved
                assert completed == ([task.completed_run_id] if task.completed_run_id else [])
            else:
                assert completed == [] and task.completed_run_id is None
            if task.status is Status.TODO:
                assert runs == []

    @invariant()
    def events_only_grow(self) -> None:
        events = self.board.events()
        assert events[: len(self.seen_events)] == self.seen_events
        self.seen_events = events


def test_board_invariants(
    open_store: Callable[[], Store], clock: Clock, request: pytest.FixtureRequest
) -> None:
    """Examples share one store (so PostgreSQL pays for its pool once); each gets a new board."""
    store = open_store()
    backend = backend_of(request.node)
    machine = type(
        "Machine",
        (BoardMachine,),
        {
            "store": store,
            "clock": clock,
            "slugs": itertools.count(),
            "on_hermes": backend == "hermes",
        },
    )
    examples, steps = BUDGET[backend]
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples, stateful_step_count=steps, deadline=None),
    )
