"""What one SQL backend supplies to ``SqlBoard``: its dialect, and the shapes the
transactions rely on (a connection that executes, a cursor, the board lock's reading).

Everything else is written once, in this package; a backend is its ``Dialect`` and its
store (``board/sqlite.py``, ``board/postgres/``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, NamedTuple, Protocol, TypeVar

T = TypeVar("T")


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What the transactions need of a connection: ``sqlite3`` and psycopg both fit."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


class BoardLock(NamedTuple):
    """What taking the board lock read: the transition's time and, for a claim, its run id."""

    now: float
    run_id: int | None


Work = Callable[[Connection], T]  # one transaction's reads and writes
Notify = Callable[[T], bool] | None  # given its result: did it change a task's status?


class Dialect(Protocol):
    """What one backend supplies to ``SqlBoard``; everything else is shared."""

    scope: str  # bound to :board in every statement
    insertion_order: str  # the column that orders tasks created in the same instant

    def sql(self, statement: str) -> str:
        """``statement`` (written with ``:name`` placeholders) in this backend's syntax."""

    def transaction(self, work: Work[T], *, write: bool, notify: Notify[T] = None) -> T:
        """``work`` in one transaction, retried within the wait budget (``board/retry.py``).

        ``notify(value)`` true: other runners are told that the board changed.
        Storage errors become ``BoardUnavailable``; anything ``work`` raises
        (``UsageError``, ``NotFound``) rolls back and propagates unchanged.
        """

    def lock_rows(self, *, skip_locked: bool = False) -> str:
        """The clause that makes a ``SELECT`` lock the task rows it returns to the commit.

        ``skip_locked``: rows another transaction holds are passed over, not waited for.
        Empty where the transaction already holds the whole board (SQLite).
        """

    def lock_board(self, connection: Connection, *, new_run: bool = False) -> BoardLock:
        """Take the board's lock for the rest of the transaction (NotFound: the board is gone).

        Returns the transition's time, read after the lock was granted, and with
        ``new_run`` a new run id (larger than every one of the task's before).
        """

    def settled_events(self) -> int | None:
        """The highest event id at or below which every event of the board has committed
        (a reader of ``events`` goes no further), or None: every committed one."""

    def setting(self, key: str) -> str:
        """The SQL expression of a task's setting ``key`` (text, NULL when unset), read
        from the ``settings`` JSON column (``board/rows.py``)."""

    def clock(self) -> tuple[str, float | None]:
        """How a statement compares with the time now: an SQL expression, and the value
        bound to ``:now`` in it (None when the expression needs none)."""

    def now(self, connection: Connection) -> float:
        """The time a transition records, in seconds since the epoch."""

    def close(self) -> None:
        """Release what this board holds of the backend (its own connections, if any)."""


@lru_cache(maxsize=256)
def pyformat(statement: str) -> str:
    """``:name`` placeholders as psycopg's ``%(name)s`` (and a literal ``%`` doubled)."""
    return re.sub(r"(?<![:\w]):([a-z_][a-z0-9_]*)", r"%(\1)s", statement.replace("%", "%%"))

