"""Several Hermes calls as one transaction: the board contract's one transition, one commit.

Each hermes-agent transition opens its own write transaction (``write_txn``:
``BEGIN IMMEDIATE`` … ``COMMIT``), so two of them cannot share one, and a crash
between them left half a transition: a ready task assigned to a lane but not
claimed, a blocked task one failure short (docs/ARCHITECTURE.md §5).
``one_transaction`` opens one write transaction and hands the calls a connection
(``Nested``) on which their ``BEGIN``/``COMMIT``/``ROLLBACK`` are savepoints inside
it: they commit together or not at all. Hermes fires its lifecycle hooks (plugins)
only once its transaction has committed, so that plugin code never runs under the
write lock nor sees a transition that is undone; inside ``one_transaction`` those
hooks wait for the outer commit (``install`` makes the module's hook call defer).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

#: The upstream function ``install`` wraps; ``home.check_api`` requires it.
HOOK = "_fire_kanban_lifecycle_hook"

Hook = tuple[str, str, dict[str, Any]]


class _Waiting(threading.local):
    """The hooks held back in this thread; None outside ``one_transaction``."""

    hooks: list[Hook] | None = None


_WAITING = _Waiting()


class Nested:
    """A Hermes connection whose transaction boundaries are savepoints of an outer one."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._depth = 0

    def execute(self, sql: str, *parameters: Any) -> sqlite3.Cursor:
        word = sql.strip().split(None, 1)[0].upper() if sql.strip() else ""
        if word == "BEGIN":
            self._depth += 1
            return self._connection.execute(f"SAVEPOINT hermes_{self._depth}")
        if word in ("COMMIT", "END"):
            return self._leave(f"RELEASE hermes_{self._depth}")
        if word == "ROLLBACK":
            name = f"hermes_{self._depth}"
            return self._leave(f"ROLLBACK TO {name}", f"RELEASE {name}")
        return self._connection.execute(sql, *parameters)

    def _leave(self, *statements: str) -> sqlite3.Cursor:
        """End the innermost savepoint. The depth drops even when SQLite refuses (its whole
        transaction already rolled back): the caller's error is the outer one's to handle."""
        self._depth -= 1
        cursor = self._connection.execute(statements[0])
        for statement in statements[1:]:
            cursor = self._connection.execute(statement)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


@contextlib.contextmanager
def one_transaction(kanban: ModuleType, connection: sqlite3.Connection) -> Iterator[Nested]:
    """One Hermes write transaction around every Hermes call made on the yielded connection.

    Raising inside rolls all of them back, and their hooks are never fired.
    """
    if _WAITING.hooks is not None:
        raise RuntimeError("one_transaction does not nest")
    held: list[Hook] = []
    _WAITING.hooks = held
    try:
        with kanban.write_txn(connection):
            yield Nested(connection)
    finally:
        _WAITING.hooks = None
    fire: Callable[..., None] = getattr(kanban, HOOK)
    for event, task_id, fields in held:
        fire(event, task_id, **fields)


def install(kanban: ModuleType) -> None:
    """Make ``kanban``'s lifecycle hooks wait for ``one_transaction``'s commit (idempotent)."""
    fire = getattr(kanban, HOOK)
    if getattr(fire, "__wrapped__", None) is not None:
        return

    def deferring(event: str, task_id: str, **fields: Any) -> None:
        if _WAITING.hooks is None:
            fire(event, task_id, **fields)
        else:
            _WAITING.hooks.append((event, task_id, fields))

    deferring.__wrapped__ = fire  # type: ignore[attr-defined]
    setattr(kanban, HOOK, deferring)
