"""The board interface every backend implements (DESIGN §5).

A ``Store`` holds boards (one SQLite file each, or rows in PostgreSQL); a
``Board`` holds tasks. Every transition is one transaction with a guard and
appends an event. Guards are exact-run: an operation on a run that is no longer
the task's current run changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lane_runner.board.model import (
    BlockKind,
    Claim,
    Comment,
    CompleteOutcome,
    Event,
    NewTask,
    Outcome,
    Run,
    Status,
    Task,
)
from lane_runner.errors import LaneRunnerError


class BoardError(LaneRunnerError):
    """A board operation failed; the message says why and what to do (exit 1)."""


class BoardUnavailable(BoardError):
    """The board's storage cannot be reached or read right now (transient or corrupt).

    Callers skip this board and keep working on the others; the journal treats a
    commit that raised this as ``pending``.
    """


class Board(Protocol):
    slug: str

    # -- tasks ---------------------------------------------------------------
    def add_task(self, new: NewTask) -> Task: ...
    def get_task(self, task_id: str) -> Task: ...
    def list_tasks(self, status: Status | None = None) -> list[Task]: ...
    def comment(self, task_id: str, body: str, author: str = "operator") -> Comment: ...
    def comments(self, task_id: str, limit: int | None = None) -> list[Comment]: ...
    def events(self, task_id: str | None = None, after_id: int = 0) -> list[Event]: ...
    def runs(self, task_id: str) -> list[Run]: ...
    def get_run(self, run_id: int) -> Run: ...
    def unblock(self, task_id: str) -> Task: ...
    def archive(self, task_id: str) -> Task: ...
    def counts(self) -> dict[str, int]: ...

    # -- the run lifecycle ----------------------------------------------------
    def claim(self, node: str, lease_ttl: float, default_assignee: str) -> Claim | None: ...
    def heartbeat(self, run_id: int, lease_ttl: float) -> bool: ...
    def complete(
        self, run_id: int, result: dict[str, Any], summary: str
    ) -> CompleteOutcome: ...
    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool: ...
    def reclaim(
        self,
        run_id: int,
        reason: str,
        outcome: Outcome,
        *,
        count_failure: bool = False,
        cooldown: float | None = None,
    ) -> bool: ...
    def running_runs(self, node: str | None = None) -> list[Run]: ...
    def expired_runs(self, now: float | None = None) -> list[Run]: ...

    def close(self) -> None: ...


class Store(Protocol):
    """Where boards live. Backends: ``sqlite`` (default) and ``postgres``."""

    def create_board(self, slug: str) -> Board: ...
    def board(self, slug: str) -> Board: ...
    def board_slugs(self) -> Sequence[str]: ...
    def wait_for_change(self, timeout: float) -> bool: ...
    def close(self) -> None: ...
