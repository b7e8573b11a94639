"""The contract suite's ``hermes`` backend: a ``HermesStore`` on a home made by Hermes's CLI.

lane-runner is read-only for Hermes's tasks and boards (Hermes owns them), so what the
suite sets up goes through Hermes's own API here, test-side only: a board is made by
``create_board`` (``hermes kanban boards create``), a task by ``create_task`` (``hermes
kanban create``) and an archive by ``archive_task`` (``hermes kanban archive``). Every
other call is lane-runner's own ``HermesBoard``.

Tests that cannot apply carry ``not_on_hermes(<why>)``; the reasons below name why.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar
from unittest import mock

import pytest

from lane_runner.board.hermes.board import HermesBoard
from lane_runner.board.hermes.store import HermesStore
from lane_runner.board.model import NewTask, Task

T = TypeVar("T")

#: The marker that skips a test on the Hermes backend only; its one argument says why.
MARKER = "not_on_hermes"

READ_ONLY_ADD = (
    "read-only command: lane-runner refuses add_task on Hermes (tasks come from "
    "'hermes kanban create'), so these checks and refusals are not lane-runner's there"
)
READ_ONLY_UNBLOCK = (
    "read-only command: lane-runner refuses unblock on Hermes ('hermes kanban unblock')"
)
READ_ONLY_ARCHIVE = (
    "read-only command: lane-runner refuses archive on Hermes ('hermes kanban archive', "
    "which also archives a running task and ends its run)"
)
READ_ONLY_BOARDS = (
    "read-only command: lane-runner refuses create_board on Hermes ('hermes kanban boards "
    "create', which takes other names, is idempotent, and every home has 'default')"
)
OWN_CLOCK = (
    "Hermes keeps its own clock (time.time()): the test moves the fake clock past a cooldown"
)
NO_REPLAY = (
    "Hermes semantic: complete_task's expected_run_id must be the task's current run, so "
    "a run that has ended is never completed: STALE, never REPLAYED "
    "(tests/hermes/test_board.py, tests/hermes/test_replay.py)"
)
HOSTED_METADATA = (
    "hosted board: the completion metadata is kept with the completed Hermes run "
    "(under 'lane_runner'), not on the event, as base.py says (tests/hermes/test_board.py)"
)
HERMES_EVENTS = (
    "Hermes semantic: lane-runner writes through Hermes's own calls, which log their own "
    "events too: assign_task 'assigned' when a claim takes the default lane, "
    "heartbeat_worker 'heartbeat' on each heartbeat"
)
PROMOTION_ORDER = (
    "Hermes semantic: Hermes promotes the children itself (complete_task's "
    "recompute_ready), in the order their rows were made, not by task id"
)
NO_CONTROLS = (
    "Hermes semantic: stopping and pausing are Hermes's dispatcher's; lane-runner "
    "refuses them there (tests/hermes/test_board.py)"
)


def not_on_hermes(why: str) -> pytest.MarkDecorator:
    """Skip the test on the Hermes backend, saying ``why``; it runs on every other one."""
    marker: pytest.MarkDecorator = getattr(pytest.mark, MARKER)(why)
    return marker


class WallClock:
    """Hermes stamps everything with its own ``time.time()``: this clock reads it.

    ``advance`` moves nothing on Hermes's side. Tests whose assertions need time to pass
    are marked ``OWN_CLOCK``; the others hold anyway: those that advance so that later
    rows are younger (Hermes breaks same-second ties by insertion order) or so that a
    renewed lease shows (it is then the claim's, to Hermes's second).
    """

    def __call__(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        """Nothing to move: Hermes's clock is the machine's."""


def copy_home(template: Path, root: Path) -> Path:
    """A fresh Hermes home: a copy of one ``hermes kanban init`` made for the module."""
    home = root / "hermes"
    shutil.copytree(template, home)
    return home


class HermesSetupBoard:
    """A ``HermesBoard``, plus the suite's setup written through Hermes's own calls."""

    def __init__(self, board: HermesBoard) -> None:
        self._board = board

    def __getattr__(self, name: str) -> Any:
        return getattr(self._board, name)

    def _hermes(self, work: Callable[[ModuleType, sqlite3.Connection], T]) -> T:
        """``work`` on a connection of Hermes's own, as its CLI would open one."""
        kb = self._board._kb
        with kb.scoped_current_board(self._board.slug):
            connection = kb.connect(db_path=self._board.path)
            try:
                return work(kb, connection)
            finally:
                connection.close()

    def add_task(self, new: NewTask) -> Task:
        """``create_task``; Hermes picks ids itself, so a test's chosen id is handed to it.
        A workspace is given as the board reports one (``dir:/srv/a``); none: scratch."""
        kind, _, path = (new.workspace or "scratch").partition(":")
        goal = new.goal_turns > 1
        fields: dict[str, Any] = {
            "workspace_kind": kind,
            "workspace_path": path or None,
            "title": new.title,
            "body": new.body or None,
            "assignee": new.assignee,
            "priority": new.priority,
            "parents": new.parents,
            "max_runtime_seconds": None if new.max_runtime is None else int(new.max_runtime),
            # Hermes's max_retries is its failure limit: one more than ours.
            "max_retries": None if new.max_retries is None else new.max_retries + 1,
            "goal_mode": goal,
            "goal_max_turns": new.goal_turns if goal else None,
        }

        def work(kb: ModuleType, connection: sqlite3.Connection) -> str:
            fresh = kb._new_task_id
            with mock.patch.object(kb, "_new_task_id", lambda: new.id or fresh()):
                return str(kb.create_task(connection, **fields))

        return self._board.get_task(self._hermes(work))

    def archive(self, task_id: str) -> Task:
        """``archive_task``, what ``hermes kanban archive`` does (False: archived already)."""
        self._hermes(lambda kb, c: kb.archive_task(c, task_id))
        return self._board.get_task(task_id)


class HermesSetupStore:
    """A ``HermesStore`` whose boards are ``HermesSetupBoard``s, made by Hermes's calls."""

    def __init__(self, store: HermesStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def create_board(self, slug: str) -> HermesSetupBoard:
        """Hermes's ``create_board``: idempotent, and other names (``READ_ONLY_BOARDS``)."""
        self._store._kb.create_board(slug)
        return self.board(slug)

    def board(self, slug: str) -> HermesSetupBoard:
        return HermesSetupBoard(self._store.board(slug))
