"""The embedded board store: one SQLite file per board under ``boards/`` (DESIGN §3.1, §5).

One file per board so a corrupt or unreadable board is skipped while the others
keep working. Every write is one ``BEGIN IMMEDIATE`` transaction holding its guard,
so two runners (threads or processes) never both win a transition. WAL lets
readers proceed during writes; ``synchronous=FULL`` because the journal retires a
pending result as soon as the board commit returns, so that commit must survive
power loss.

Threads: each ``SqliteBoard`` has one connection guarded by a lock. SQLite
serialises writers anyway, and one connection per board keeps the number of open
files bounded however many worker threads the daemon runs. A second, read-only use
connection watches ``PRAGMA data_version``, which changes on every commit made by
any other connection, including this process's own operation connection.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson

from lane_runner.board import rules
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.inotify import DirectoryWatch
from lane_runner.board.model import (
    BlockKind,
    Claim,
    Comment,
    CompleteOutcome,
    Event,
    EventKind,
    NewTask,
    Outcome,
    Run,
    Status,
    Task,
)
from lane_runner.board.rows import run_from_row, task_from_row
from lane_runner.errors import NotFound, UsageError
from lane_runner.names import check_name, is_valid_name

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]

BUSY_TIMEOUT_MS = 5000
SETTLE_LOOKS, SETTLE_DELAY = 10, 0.005  # after a WAL write, how long a commit may take to show
RETRY_DELAYS = (0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def _in(values: Sequence[str]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


_STATUSES = _in([s.value for s in Status])
_OUTCOMES = _in([o.value for o in Outcome])
_KINDS = _in([k.value for k in BlockKind])

# Forward migrations: step n brings a board from user_version n to n + 1. Append
# steps; never edit a released one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f"""CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            body TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN {_STATUSES}),
            assignee TEXT,
            priority INTEGER NOT NULL,
            workspace TEXT,
            max_runtime REAL CHECK (max_runtime IS NULL OR max_runtime > 0),
            goal_turns INTEGER NOT NULL CHECK (goal_turns >= 1),
            current_run_id INTEGER,
            completed_run_id INTEGER,
            next_attempt_at REAL,
            block_reason TEXT,
            block_kind TEXT CHECK (block_kind IS NULL OR block_kind IN {_KINDS}),
            summary TEXT,
            result TEXT,
            failure_count INTEGER NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            CHECK ((status = 'running') = (current_run_id IS NOT NULL)),
            CHECK ((status = 'blocked') = (block_kind IS NOT NULL))
        )""",
        """CREATE TABLE task_links (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            parent_id TEXT NOT NULL REFERENCES tasks(id),
            position INTEGER NOT NULL,
            PRIMARY KEY (task_id, parent_id),
            CHECK (task_id != parent_id)
        )""",
        "CREATE INDEX task_links_parent ON task_links(parent_id)",
        f"""CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT NOT NULL REFERENCES tasks(id),
            node TEXT NOT NULL,
            claimed_at REAL NOT NULL,
            lease_expires_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL,
            ended_at REAL,
            outcome TEXT CHECK (outcome IS NULL OR outcome IN {_OUTCOMES}),
            reason TEXT,
            CHECK ((ended_at IS NULL) = (outcome IS NULL))
        )""",
        "CREATE INDEX runs_task ON runs(task_id, id)",
        "CREATE INDEX runs_open ON runs(ended_at, node)",
        "CREATE INDEX tasks_claimable ON tasks(status, priority DESC, created_at)",
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT NOT NULL REFERENCES tasks(id),
            kind TEXT NOT NULL,
            run_id INTEGER,
            at REAL NOT NULL,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX events_task ON events(task_id, id)",
        """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
           BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
        """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
           BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
        """CREATE TABLE comments (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT NOT NULL REFERENCES tasks(id),
            author TEXT NOT NULL,
            body TEXT NOT NULL,
            at REAL NOT NULL
        )""",
        "CREATE INDEX comments_task ON comments(task_id, id)",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    connection.row_factory = sqlite3.Row
    connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA synchronous = FULL")
    return connection


def _json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


class SqliteBoard:
    """One board file. Methods are safe to call from several threads."""

    def __init__(self, slug: str, path: Path, failure_limit: int, clock: Clock) -> None:
        self.slug = slug
        self._path = path
        self._failure_limit = failure_limit
        self._clock = clock
        self._lock = threading.Lock()
        self._watch_lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._watch: sqlite3.Connection | None = None
        try:
            try:
                self._conn = _connect(path)
                # Persistent in the file; a no-op once set. Outside any transaction.
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._watch = _connect(path)
            except sqlite3.Error as error:
                raise self._unavailable(error) from error
            self._transaction(self._migrate, write=True)
            self._seen_version = self.data_version()
        except BaseException:
            self.close()
            raise

    # -- storage plumbing ------------------------------------------------------

    def _unavailable(self, error: sqlite3.Error) -> BoardUnavailable:
        return BoardUnavailable(
            f"board {self.slug!r} ({self._path}) is unavailable: {error}; "
            "check the file (restore it from a backup if it is corrupt)"
        )

    def _transaction(self, work: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run ``work`` in one transaction, retrying busy/locked with a bounded backoff.

        ``work`` only touches the database, so re-running it after a rollback is safe.
        Anything that is not a storage error (a guard's UsageError) rolls back and
        propagates unchanged.
        """
        begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        for delay in (*RETRY_DELAYS, None):
            try:
                with self._lock:
                    return self._attempt(work, begin)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as error:
                if delay is None or not _is_busy(error):
                    raise self._unavailable(error) from error
                log.debug("board %s busy (%s); retrying in %.2fs", self.slug, error, delay)
            time.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _attempt(self, work: Callable[[sqlite3.Connection], T], begin: str) -> T:
        connection = self._conn
        if connection is None:
            raise sqlite3.ProgrammingError("board is closed")
        try:
            connection.execute(begin)
            value = work(connection)
            connection.execute("COMMIT")
            return value
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def _migrate(self, connection: sqlite3.Connection) -> None:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {version} is newer than this lane-runner knows "
                f"({SCHEMA_VERSION}); upgrade lane-runner"
            )
        for step in MIGRATIONS[version:]:
            for statement in step:
                connection.execute(statement)
        if version < SCHEMA_VERSION:
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            log.info("board %s migrated from schema %d to %d", self.slug, version, SCHEMA_VERSION)

    def data_version(self) -> int:
        """A number that differs after any commit to this board by any connection."""
        try:
            with self._watch_lock:
                if self._watch is None:
                    raise sqlite3.ProgrammingError("board is closed")
                return int(self._watch.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as error:
            raise self._unavailable(error) from error

    def changed(self) -> bool:
        """True once per batch of commits made since the last call, by anyone."""
        version = self.data_version()
        if version == self._seen_version:
            return False
        self._seen_version = version
        return True

    def close(self) -> None:
        for connection in (self._conn, self._watch):
            if connection is not None:
                connection.close()
        self._conn = self._watch = None

    # -- row mapping -----------------------------------------------------------

    def _task_row(self, row: sqlite3.Row, parents: tuple[str, ...]) -> Task:
        return task_from_row(row, self.slug, parents)

    def _run_row(self, row: sqlite3.Row) -> Run:
        return run_from_row(row, self.slug)

    @staticmethod
    def _parents(connection: sqlite3.Connection, task_id: str) -> tuple[str, ...]:
        rows = connection.execute(
            "SELECT parent_id FROM task_links WHERE task_id = ? ORDER BY position", (task_id,)
        )
        return tuple(row[0] for row in rows)

    def _task(self, connection: sqlite3.Connection, task_id: str) -> Task:
        row = connection.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            raise NotFound(
                f"no task {task_id!r} on board {self.slug!r}; "
                f"see 'lane-runner task ls --board {self.slug}'"
            )
        return self._task_row(row, self._parents(connection, task_id))

    def _run(self, connection: sqlite3.Connection, run_id: int) -> Run:
        row = connection.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id} on board {self.slug!r}")
        return self._run_row(row)

    def _current(
        self, connection: sqlite3.Connection, run_id: int
    ) -> tuple[sqlite3.Row, float] | None:
        """The task row whose current run is ``run_id`` (still running), and now."""
        row = connection.execute(
            "SELECT * FROM tasks WHERE current_run_id = ? AND status = 'running'", (run_id,)
        ).fetchone()
        return (row, self._clock()) if row is not None else None

    @staticmethod
    def _event(
        connection: sqlite3.Connection,
        task_id: str,
        kind: EventKind,
        at: float,
        run_id: int | None = None,
        **data: Any,
    ) -> None:
        connection.execute(
            "INSERT INTO events (task_id, kind, run_id, at, data) VALUES (?, ?, ?, ?, ?)",
            (task_id, kind.value, run_id, at, _json(data)),
        )

    @staticmethod
    def _end_run(
        connection: sqlite3.Connection, run_id: int, outcome: Outcome, reason: str | None, at: float
    ) -> None:
        connection.execute(
            "UPDATE runs SET ended_at = ?, outcome = ?, reason = ? "
            "WHERE id = ? AND ended_at IS NULL",
            (at, outcome.value, reason, run_id),
        )

    # -- tasks -----------------------------------------------------------------

    def add_task(self, new: NewTask) -> Task:
        new = rules.checked_task(new)

        def work(connection: sqlite3.Connection) -> Task:
            task_id = new.id or self._fresh_id(connection)
            if connection.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone():
                raise UsageError(f"task {task_id!r} already exists on board {self.slug!r}")
            if rules.would_cycle(task_id, new.parents, lambda t: self._parents(connection, t)):
                raise UsageError(f"task {task_id!r} cannot be its own ancestor (parent cycle)")
            statuses = [self._parent_status(connection, parent) for parent in new.parents]
            now = self._clock()
            connection.execute(
                "INSERT INTO tasks (id, title, body, status, assignee, priority, workspace, "
                "max_runtime, goal_turns, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task_id, new.title, new.body, rules.initial_status(statuses).value,
                    new.assignee, new.priority, new.workspace, new.max_runtime,
                    new.goal_turns, now, now,
                ),
            )
            connection.executemany(
                "INSERT INTO task_links (task_id, parent_id, position) VALUES (?, ?, ?)",
                [(task_id, parent, index) for index, parent in enumerate(new.parents)],
            )
            self._event(connection, task_id, EventKind.CREATED, now, title=new.title)
            return self._task(connection, task_id)

        return self._transaction(work, write=True)

    @staticmethod
    def _fresh_id(connection: sqlite3.Connection) -> str:
        while True:
            candidate = rules.new_task_id()
            if not connection.execute("SELECT 1 FROM tasks WHERE id = ?", (candidate,)).fetchone():
                return candidate

    def _parent_status(self, connection: sqlite3.Connection, parent: str) -> Status:
        row = connection.execute("SELECT status FROM tasks WHERE id = ?", (parent,)).fetchone()
        if row is None:
            raise UsageError(
                f"no parent task {parent!r} on board {self.slug!r}: "
                "parents must be tasks on the same board"
            )
        status = Status(row[0])
        if status is Status.ARCHIVED:
            raise UsageError(f"parent task {parent!r} is archived; a child of it would never run")
        return status

    def get_task(self, task_id: str) -> Task:
        return self._transaction(lambda c: self._task(c, task_id), write=False)

    def list_tasks(self, status: Status | None = None) -> list[Task]:
        def work(connection: sqlite3.Connection) -> list[Task]:
            links: dict[str, list[str]] = {}
            for row in connection.execute(
                "SELECT task_id, parent_id FROM task_links ORDER BY task_id, position"
            ):
                links.setdefault(row[0], []).append(row[1])
            query = "SELECT * FROM tasks"
            parameters: tuple[str, ...] = ()
            if status is not None:
                query += " WHERE status = ?"
                parameters = (Status(status).value,)
            rows = connection.execute(query + " ORDER BY created_at, rowid", parameters)
            return [self._task_row(row, tuple(links.get(row["id"], ()))) for row in rows]

        return self._transaction(work, write=False)

    def comment(self, task_id: str, body: str, author: str = "operator") -> Comment:
        rules.check_comment(body)

        def work(connection: sqlite3.Connection) -> Comment:
            self._task(connection, task_id)
            now = self._clock()
            cursor = connection.execute(
                "INSERT INTO comments (task_id, author, body, at) VALUES (?, ?, ?, ?)",
                (task_id, author, body, now),
            )
            return Comment(int(cursor.lastrowid or 0), self.slug, task_id, author, body, now)

        return self._transaction(work, write=True)

    def comments(self, task_id: str, limit: int | None = None) -> list[Comment]:
        def work(connection: sqlite3.Connection) -> list[Comment]:
            self._task(connection, task_id)
            rows = connection.execute(
                "SELECT * FROM (SELECT * FROM comments WHERE task_id = ? ORDER BY id DESC "
                "LIMIT ?) ORDER BY id",
                (task_id, -1 if limit is None else limit),
            )
            return [
                Comment(r["id"], self.slug, r["task_id"], r["author"], r["body"], r["at"])
                for r in rows
            ]

        return self._transaction(work, write=False)

    def events(self, task_id: str | None = None, after_id: int = 0) -> list[Event]:
        def work(connection: sqlite3.Connection) -> list[Event]:
            if task_id is None:
                rows = connection.execute(
                    "SELECT * FROM events WHERE id > ? ORDER BY id", (after_id,)
                )
            else:
                self._task(connection, task_id)
                rows = connection.execute(
                    "SELECT * FROM events WHERE task_id = ? AND id > ? ORDER BY id",
                    (task_id, after_id),
                )
            return [
                Event(
                    r["id"], self.slug, r["task_id"], r["kind"], r["run_id"], r["at"],
                    orjson.loads(r["data"]),
                )
                for r in rows
            ]

        return self._transaction(work, write=False)

    def runs(self, task_id: str) -> list[Run]:
        def work(connection: sqlite3.Connection) -> list[Run]:
            self._task(connection, task_id)
            rows = connection.execute(
                "SELECT * FROM runs WHERE task_id = ? ORDER BY id", (task_id,)
            )
            return [self._run_row(row) for row in rows]

        return self._transaction(work, write=False)

    def get_run(self, run_id: int) -> Run:
        return self._transaction(lambda c: self._run(c, run_id), write=False)

    def unblock(self, task_id: str) -> Task:
        def work(connection: sqlite3.Connection) -> Task:
            task = self._task(connection, task_id)
            if task.status is not Status.BLOCKED:
                raise UsageError(f"task {task_id!r} is {task.status}, not blocked")
            statuses = [Status(self._task(connection, p).status) for p in task.parents]
            now = self._clock()
            connection.execute(
                "UPDATE tasks SET status = ?, block_reason = NULL, block_kind = NULL, "
                "failure_count = 0, next_attempt_at = NULL, updated_at = ? WHERE id = ?",
                (rules.initial_status(statuses).value, now, task_id),
            )
            self._event(connection, task_id, EventKind.UNBLOCKED, now)
            return self._task(connection, task_id)

        return self._transaction(work, write=True)

    def archive(self, task_id: str) -> Task:
        def work(connection: sqlite3.Connection) -> Task:
            task = self._task(connection, task_id)
            if task.status is Status.RUNNING:
                raise UsageError(
                    f"task {task_id!r} is running (run {task.current_run_id}); stop it first"
                )
            if task.status is Status.ARCHIVED:
                return task
            now = self._clock()
            connection.execute(
                "UPDATE tasks SET status = 'archived', block_kind = NULL, updated_at = ? "
                "WHERE id = ?",
                (now, task_id),
            )
            self._event(connection, task_id, EventKind.ARCHIVED, now, previous=task.status.value)
            return self._task(connection, task_id)

        return self._transaction(work, write=True)

    def counts(self) -> dict[str, int]:
        def work(connection: sqlite3.Connection) -> dict[str, int]:
            counted = dict.fromkeys((s.value for s in Status), 0)
            for row in connection.execute("SELECT status, COUNT(*) FROM tasks GROUP BY status"):
                counted[row[0]] = row[1]
            return counted

        return self._transaction(work, write=False)

    # -- the run lifecycle -----------------------------------------------------

    def claim(self, node: str, lease_ttl: float, default_assignee: str) -> Claim | None:
        if not lease_ttl > 0:
            raise UsageError(f"lease ttl must be more than 0 seconds, not {lease_ttl:g}")

        def work(connection: sqlite3.Connection) -> Claim | None:
            now = self._clock()
            candidates = connection.execute(
                "SELECT id, assignee FROM tasks WHERE status = 'ready' "
                "AND (next_attempt_at IS NULL OR next_attempt_at <= ?) "
                "ORDER BY priority DESC, created_at, rowid",
                (now,),
            )
            for row in candidates:
                assignee = rules.claim_assignee(row["assignee"], default_assignee)
                if assignee is not None:
                    task_id = row["id"]
                    break
            else:
                return None
            cursor = connection.execute(
                "INSERT INTO runs (task_id, node, claimed_at, lease_expires_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (task_id, node, now, now + lease_ttl, now),
            )
            run_id = int(cursor.lastrowid or 0)
            connection.execute(
                "UPDATE tasks SET status = 'running', assignee = ?, current_run_id = ?, "
                "updated_at = ? WHERE id = ?",
                (assignee, run_id, now, task_id),
            )
            self._event(connection, task_id, EventKind.CLAIMED, now, run_id, node=node)
            return Claim(self._task(connection, task_id), self._run(connection, run_id))

        return self._transaction(work, write=True)

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        def work(connection: sqlite3.Connection) -> bool:
            now = self._clock()
            cursor = connection.execute(
                "UPDATE runs SET lease_expires_at = ?, heartbeat_at = ? "
                "WHERE id = ? AND ended_at IS NULL AND EXISTS (SELECT 1 FROM tasks "
                "WHERE current_run_id = runs.id AND status = 'running')",
                (now + lease_ttl, now, run_id),
            )
            return cursor.rowcount == 1

        return self._transaction(work, write=True)

    def complete(self, run_id: int, result: dict[str, Any], summary: str) -> CompleteOutcome:
        def work(connection: sqlite3.Connection) -> CompleteOutcome:
            run = connection.execute("SELECT task_id FROM runs WHERE id = ?", (run_id,)).fetchone()
            if run is None:
                return CompleteOutcome.STALE
            task = self._task(connection, run["task_id"])
            latest = connection.execute(
                "SELECT MAX(id) FROM runs WHERE task_id = ? AND ended_at IS NOT NULL",
                (task.id,),
            ).fetchone()[0]
            outcome = rules.completion(
                run_id,
                status=task.status,
                current_run_id=task.current_run_id,
                completed_run_id=task.completed_run_id,
                latest_ended_run_id=latest,
                result_matches=rules.same_result(task.result, result),
            )
            if outcome in (CompleteOutcome.COMPLETED, CompleteOutcome.REPLAYED):
                self._record_completion(connection, task, run_id, result, summary, outcome)
            return outcome

        return self._transaction(work, write=True)

    def _record_completion(
        self,
        connection: sqlite3.Connection,
        task: Task,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        outcome: CompleteOutcome,
    ) -> None:
        now = self._clock()
        if outcome is CompleteOutcome.COMPLETED:
            self._end_run(connection, run_id, Outcome.COMPLETED, None, now)
            kind = EventKind.COMPLETED
        else:
            connection.execute(
                "UPDATE runs SET outcome = 'completed' WHERE id = ?", (run_id,)
            )
            kind = EventKind.REPLAYED
        connection.execute(
            "UPDATE tasks SET status = 'done', current_run_id = NULL, completed_run_id = ?, "
            "summary = ?, result = ?, failure_count = 0, next_attempt_at = NULL, "
            "block_reason = NULL, block_kind = NULL, updated_at = ? WHERE id = ?",
            (run_id, summary, rules.canonical_json(result).decode("utf-8"), now, task.id),
        )
        self._event(connection, task.id, kind, now, run_id)
        self._promote_children(connection, task.id, now)

    def _promote_children(self, connection: sqlite3.Connection, parent: str, now: float) -> None:
        children = connection.execute(
            "SELECT t.id FROM tasks t JOIN task_links l ON l.task_id = t.id "
            "WHERE l.parent_id = ? AND t.status = 'todo'",
            (parent,),
        ).fetchall()
        for (child,) in children:
            statuses = connection.execute(
                "SELECT p.status FROM task_links l JOIN tasks p ON p.id = l.parent_id "
                "WHERE l.task_id = ?",
                (child,),
            )
            if rules.initial_status(Status(row[0]) for row in statuses) is Status.READY:
                connection.execute(
                    "UPDATE tasks SET status = 'ready', updated_at = ? WHERE id = ?", (now, child)
                )
                self._event(connection, child, EventKind.PROMOTED, now, parent=parent)

    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool:
        kind = BlockKind(kind)

        def work(connection: sqlite3.Connection) -> bool:
            current = self._current(connection, run_id)
            if current is None:
                return False
            task, now = current
            self._end_run(connection, run_id, Outcome.BLOCKED, reason, now)
            self._set_blocked(
                connection, task["id"], reason, kind, task["failure_count"] + count_failure, now
            )
            self._event(
                connection, task["id"], EventKind.BLOCKED, now, run_id,
                reason=reason, block_kind=kind.value,
            )
            return True

        return self._transaction(work, write=True)

    @staticmethod
    def _set_blocked(
        connection: sqlite3.Connection,
        task_id: str,
        reason: str,
        kind: BlockKind,
        failure_count: int,
        now: float,
    ) -> None:
        connection.execute(
            "UPDATE tasks SET status = 'blocked', current_run_id = NULL, block_reason = ?, "
            "block_kind = ?, failure_count = ?, next_attempt_at = NULL, updated_at = ? "
            "WHERE id = ?",
            (reason, kind.value, failure_count, now, task_id),
        )

    def reclaim(
        self,
        run_id: int,
        reason: str,
        outcome: Outcome,
        *,
        count_failure: bool = False,
        cooldown: float | None = None,
    ) -> bool:
        outcome = rules.check_reclaim_outcome(Outcome(outcome))

        def work(connection: sqlite3.Connection) -> bool:
            current = self._current(connection, run_id)
            if current is None:
                return False
            task, now = current
            self._end_run(connection, run_id, outcome, reason, now)
            failures = task["failure_count"] + count_failure
            if count_failure and rules.gives_up(failures, self._failure_limit):
                because = f"gave up after {failures} failures; last: {reason}"
                self._set_blocked(connection, task["id"], because, BlockKind.GAVE_UP, failures, now)
                self._event(
                    connection, task["id"], EventKind.GAVE_UP, now, run_id,
                    reason=reason, outcome=outcome.value, failures=failures,
                )
                return True
            connection.execute(
                "UPDATE tasks SET status = 'ready', current_run_id = NULL, failure_count = ?, "
                "next_attempt_at = ?, updated_at = ? WHERE id = ?",
                (failures, None if cooldown is None else now + cooldown, now, task["id"]),
            )
            self._event(
                connection, task["id"], EventKind.RECLAIMED, now, run_id,
                reason=reason, outcome=outcome.value, cooldown=cooldown,
            )
            return True

        return self._transaction(work, write=True)

    def running_runs(self, node: str | None = None) -> list[Run]:
        def work(connection: sqlite3.Connection) -> list[Run]:
            query = "SELECT * FROM runs WHERE ended_at IS NULL"
            parameters: tuple[str, ...] = ()
            if node is not None:
                query += " AND node = ?"
                parameters = (node,)
            rows = connection.execute(query + " ORDER BY id", parameters)
            return [self._run_row(row) for row in rows]

        return self._transaction(work, write=False)

    def expired_runs(self, now: float | None = None) -> list[Run]:
        def work(connection: sqlite3.Connection) -> list[Run]:
            rows = connection.execute(
                "SELECT * FROM runs WHERE ended_at IS NULL AND lease_expires_at <= ? ORDER BY id",
                (self._clock() if now is None else now,),
            )
            return [self._run_row(row) for row in rows]

        return self._transaction(work, write=False)


class SqliteStore:
    """Boards as ``<slug>.db`` files in one directory; opened lazily and kept open."""

    def __init__(
        self, boards_dir: Path, failure_limit: int = 3, clock: Clock = time.time
    ) -> None:
        self._dir = boards_dir
        self._failure_limit = failure_limit
        self._clock = clock
        self._boards: dict[str, SqliteBoard] = {}
        self._reported: set[str] = set()
        self._lock = threading.Lock()
        self._dir_stamp = self._stamp()
        self._watch: DirectoryWatch | None = None

    def _path(self, slug: str) -> Path:
        return self._dir / f"{check_name('board', slug)}.db"

    def create_board(self, slug: str) -> SqliteBoard:
        path = self._path(slug)
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            # O_EXCL: of two concurrent creators exactly one wins; an empty file is a
            # valid empty database that the first open migrates.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise UsageError(f"board {slug!r} already exists") from None
        return self.board(slug)

    def board(self, slug: str) -> SqliteBoard:
        path = self._path(slug)
        with self._lock:
            opened = self._boards.get(slug)
            if opened is not None:
                return opened
            if not path.is_file():
                raise NotFound(
                    f"no board {slug!r}; create it with 'lane-runner board create {slug}'"
                )
            try:
                opened = SqliteBoard(slug, path, self._failure_limit, self._clock)
            except BoardUnavailable as error:
                self._report(slug, error)
                raise
            self._reported.discard(slug)
            self._boards[slug] = opened
            return opened

    def _report(self, slug: str, error: BoardUnavailable) -> None:
        """Log a broken board once, not on every tick that skips it."""
        if slug not in self._reported:
            self._reported.add(slug)
            log.error("%s; skipping it, the other boards keep working", error)

    def board_slugs(self) -> list[str]:
        try:
            names = [entry.name for entry in os.scandir(self._dir) if entry.is_file()]
        except FileNotFoundError:
            return []
        return sorted(
            name[: -len(".db")]
            for name in names
            if name.endswith(".db") and is_valid_name(name[: -len(".db")])
        )

    def _stamp(self) -> int | None:
        try:
            return self._dir.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def _changed(self) -> bool:
        stamp = self._stamp()
        changed = stamp != self._dir_stamp
        self._dir_stamp = stamp
        with self._lock:
            boards = list(self._boards.items())
        for slug, opened in boards:
            try:
                changed = opened.changed() or changed
            except BoardUnavailable as error:
                self._report(slug, error)
        return changed

    def wait_for_change(self, timeout: float) -> bool:
        """Block up to ``timeout`` s; True as soon as an opened board or the set of boards changed.

        Commits are seen from any connection, this process's included, so the caller
        may wake once for its own write; that costs one empty claim, never a miss.
        Between looks it blocks on an inotify watch of the boards directory (every
        commit writes a ``-wal`` file there), so waiting costs no CPU.
        """
        deadline = time.monotonic() + timeout
        if timeout > 0 and self._watch is None:
            self._watch = DirectoryWatch(self._dir)  # before the first look: no write slips by
        while not self._changed():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._watch is None:
                return False
            if self._watch.wait(remaining) and self._settles():
                return True
        return True

    def _settles(self) -> bool:
        """Look again for a few ms after a write: the WAL is written before the commit shows."""
        for _ in range(SETTLE_LOOKS):
            time.sleep(SETTLE_DELAY)
            if self._changed():
                return True
        return False

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        with self._lock:
            boards, self._boards = list(self._boards.values()), {}
        for opened in boards:
            opened.close()
