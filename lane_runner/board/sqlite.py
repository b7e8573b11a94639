"""The embedded board store: one SQLite file per board under ``boards/`` (docs/ARCHITECTURE.md §5).

One file per board so a corrupt or unreadable board is skipped while the others
keep working. The transactions are ``board/sql/``'s; this module holds what is
SQLite's own: the schema, the connections, ``BEGIN IMMEDIATE`` as the board lock,
and change detection.

Every transition is one ``BEGIN IMMEDIATE`` transaction, so two runners (threads
or processes) never both win one. WAL lets readers proceed during writes;
``synchronous=FULL`` because the journal retires a pending result as soon as the
board commit returns, so that commit must survive power loss. A locked file is
waited for within the wait budget (``board/retry.py``), never longer.

Threads: each board file has one connection guarded by a lock. SQLite serialises
writers anyway, and one connection per board keeps the number of open files
bounded however many worker threads the daemon runs. A second, read-only
connection watches ``PRAGMA data_version``, which changes on every commit made by
any other connection, including this process's own operation connection.

Both connections stay open, so each is checked before use against the file the
path names now (``fileconn``): a board removed and made again under a running
daemon is opened anew (and migrated), a removed one is unavailable, and neither
is ever written through the old file. Connections open with ``mode=rw``: a board
file is made only by ``create_board``, never by opening a missing one.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from lane_runner import files, suggest
from lane_runner.board import retry
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.fileconn import FileConnection, Identity
from lane_runner.board.inotify import DirectoryWatch, wait_for_commit
from lane_runner.board.sql.board import SqlBoard
from lane_runner.board.sql.dialect import BoardLock, Connection, Notify, Work
from lane_runner.board.sql.schema import (
    APPROVAL_STEP,
    BUDGET_COLUMNS,
    BUDGET_KIND,
    CONTROLS_STEP,
    FIRST_BLOCK_KINDS,
    FIRST_OUTCOMES,
    FIRST_STATUSES,
    OUTBOX_STEP,
    REVIEW_RUN_COLUMNS,
    REVIEWED_OUTCOME,
    SETTINGS_COLUMN,
    SETTINGS_KINDS,
    USAGE_STEP,
    Statement,
    upgrade,
)
from lane_runner.errors import NotFound, UsageError
from lane_runner.names import check_name, is_valid_name

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]

SETTLE_LOOKS = 10  # after a WAL write, how many looks a commit may take to show
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def _in(values: Sequence[str]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


_STATUSES = _in(FIRST_STATUSES)
_OUTCOMES = _in(FIRST_OUTCOMES)  # the first step's; the review runs' step widens it
_ALL_OUTCOMES = _in([*FIRST_OUTCOMES, REVIEWED_OUTCOME])
_KINDS = _in(FIRST_BLOCK_KINDS)  # the first step's; later steps widen it
_BUDGET_KINDS = _in([*FIRST_BLOCK_KINDS, BUDGET_KIND])
_ALL_KINDS = _in([*FIRST_BLOCK_KINDS, BUDGET_KIND, *SETTINGS_KINDS])

# Forward migrations: step n brings a board from user_version n to n + 1. Append
# steps; never edit a released one.
MIGRATIONS: tuple[tuple[Statement, ...], ...] = (
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
    # The board column every statement of board/sql/ names: constant here (a file
    # is one board, whatever it is called), one value per board in PostgreSQL.
    tuple(
        f"ALTER TABLE {table} ADD COLUMN board TEXT NOT NULL DEFAULT ''"
        for table in ("tasks", "task_links", "runs", "events", "comments")
    ),    CONTROLS_STEP,
    # Deleting a task (or a board): events stay append-only while their task lives, and
    # go with it once it is archived (``SqlBoard.delete``).
    (
        "DROP TRIGGER events_no_delete",
        """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
           WHEN NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.board = OLD.board
                            AND tasks.id = OLD.task_id AND tasks.status = 'archived')
           BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
    ),
    (*BUDGET_COLUMNS, lambda connection: _widen_kinds(connection, _KINDS, _BUDGET_KINDS)),
    USAGE_STEP,
    (SETTINGS_COLUMN, lambda connection: _widen_kinds(connection, _BUDGET_KINDS, _ALL_KINDS)),
    OUTBOX_STEP,
    APPROVAL_STEP,
    # A reviewer's run of its own beside the implementer's (``ReviewRuns``).
    (*REVIEW_RUN_COLUMNS,
     lambda connection: _widen_kinds(connection, _OUTCOMES, _ALL_OUTCOMES, table="runs")),
)


def _widen_kinds(connection: Connection, old: str, new: str, table: str = "tasks") -> None:
    """Let ``block_kind`` (or the runs' ``outcome``) say more: SQLite cannot alter a
    CHECK, so the table's stored definition is edited in place, which SQLite documents
    for changes that leave every stored row valid (a check that allows more values),
    then the schema version is advanced so every connection reads the new definition."""
    version = connection.execute("PRAGMA schema_version").fetchone()[0]
    connection.execute("PRAGMA writable_schema = ON")
    try:
        connection.execute(
            "UPDATE sqlite_master SET sql = replace(sql, ?, ?) "
            "WHERE type = 'table' AND name = ?", (old, new, table))
        connection.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        connection.execute("PRAGMA writable_schema = OFF")
    sql = connection.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()[0]
    if new not in sql:
        raise BoardUnavailable(f"the {table} table's check could not be widened "
                               f"to {new}; the board is left at its schema")


SCHEMA_VERSION = len(MIGRATIONS)


class HeldInThisProcess(Exception):
    """Another thread of this process is inside a transaction on the same board file."""


def _is_busy(error: Exception) -> bool:
    if isinstance(error, HeldInThisProcess):
        return True
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(
        f"{path.absolute().as_uri()}?mode=rw",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
    )
    connection.row_factory = sqlite3.Row
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA synchronous = FULL")
    return connection


def _run(connection: sqlite3.Connection, work: Work[T], begin: str) -> T:
    """``work`` between ``begin`` and ``COMMIT``; rolled back if anything raises."""
    try:
        connection.execute(begin)
        value = work(connection)
        connection.execute("COMMIT")
        return value
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


class SqliteFile:
    """One board file: the dialect ``SqlBoard`` runs its transactions through."""

    scope = ""  # the file is the board
    insertion_order = "rowid"

    def __init__(self, slug: str, path: Path, clock: Clock, budget: float) -> None:
        self.slug = slug
        self._path = path
        self._clock = clock
        self._budget = budget
        self._lock = threading.Lock()
        self._watch_lock = threading.Lock()
        self._closed = False
        self._conn: FileConnection | None = None
        self._watch: FileConnection | None = None
        try:
            self.transaction(lambda connection: None, write=True)  # opens and migrates
            self._seen_version = self.data_version()
        except BaseException:
            self.close()
            raise

    def _unavailable(self, error: Exception) -> BoardUnavailable:
        return BoardUnavailable(
            f"board {self.slug!r} ({self._path}) is unavailable: {error}; "
            "check the file (restore it from a backup if it is corrupt)"
        )

    # -- the dialect -----------------------------------------------------------

    def sql(self, statement: str) -> str:
        return statement

    def transaction(self, work: Work[T], *, write: bool, notify: Notify[T] = None) -> T:
        """``work`` in one transaction; a locked file is retried within the wait budget.

        ``notify`` is not needed here: every commit changes ``data_version``, which
        ``SqliteStore.wait_for_change`` watches.
        """
        begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        try:
            return retry.bounded(
                lambda remaining: self._attempt(work, begin, remaining),
                transient=_is_busy,
                budget=self._budget,
                what=f"board {self.slug}",
            )
        except sqlite3.IntegrityError:
            raise
        except (sqlite3.Error, HeldInThisProcess) as error:
            raise self._unavailable(error) from error

    def _attempt(self, work: Work[T], begin: str, remaining: float) -> T:
        if not self._lock.acquire(timeout=remaining):
            raise HeldInThisProcess(f"another thread held board {self.slug!r} for {remaining:.2f}s")
        try:
            connection = self._connection(remaining)
            connection.execute(f"PRAGMA busy_timeout = {int(remaining * 1000)}")
            return _run(connection, work, begin)
        finally:
            self._lock.release()

    def _connection(self, remaining: float) -> sqlite3.Connection:
        """The board's connection, on the file the path names now (opened and migrated anew
        after a replacement). Called with ``_lock`` held."""
        if self._closed:
            raise sqlite3.ProgrammingError("board is closed")
        if self._conn is not None and self._conn.is_current(self._path):
            return self._conn.connection
        if self._conn is not None:
            log.warning("board %s: %s was replaced or removed; reopening it", self.slug, self._path)
            self._conn.close()
            self._conn = None
        opened = FileConnection(self._path, _connect)
        try:
            opened.connection.execute(f"PRAGMA busy_timeout = {int(remaining * 1000)}")
            # Persistent in the file; a no-op once set. Outside any transaction.
            opened.connection.execute("PRAGMA journal_mode = WAL")
            _run(opened.connection, self._migrate, "BEGIN IMMEDIATE")
        except BaseException:
            opened.close()
            raise
        self._conn = opened
        return opened.connection

    def lock_board(self, connection: Connection, *, new_run: bool = False) -> BoardLock:
        """Nothing to take: ``BEGIN IMMEDIATE`` took the file's write lock. The time is the
        clock's; a run id is one past the last ``runs`` row's (AUTOINCREMENT keeps it)."""
        run_id = None
        if new_run:
            row = connection.execute(
                "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'runs'), 0) + 1"
            ).fetchone()
            run_id = int(row[0])
        return BoardLock(self._clock(), run_id)

    def settled_events(self) -> None:
        """No bound: writers hold the whole file one at a time, so events commit in id order."""
        return None

    def lock_rows(self, *, skip_locked: bool = False) -> str:
        """Nothing: the write transaction holds the whole file from its ``BEGIN IMMEDIATE``."""
        return ""

    def setting(self, key: str) -> str:
        return f"json_extract(settings, '$.{key}')"

    def clock(self) -> tuple[str, float | None]:
        return ":now", self._clock()

    def now(self, connection: Connection) -> float:
        return self._clock()

    def _migrate(self, connection: Connection) -> None:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if upgrade(connection, version, MIGRATIONS, f"board {self.slug!r} ({self._path})"):
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            log.info("board %s migrated from schema %d to %d", self.slug, version, SCHEMA_VERSION)

    # -- change detection ------------------------------------------------------

    def data_version(self) -> tuple[Identity, int]:
        """The board's file and a number that differs after any commit to it by anyone.

        The file is part of it: a watch opened anew on a replaced file starts its own
        count, which may equal the old one's.
        """
        try:
            with self._watch_lock:
                if self._closed:
                    raise sqlite3.ProgrammingError("board is closed")
                if self._watch is not None and not self._watch.is_current(self._path):
                    self._watch.close()
                    self._watch = None
                if self._watch is None:
                    self._watch = FileConnection(self._path, _connect)
                version = self._watch.connection.execute("PRAGMA data_version").fetchone()[0]
                return self._watch.identity, int(version)
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
        self._closed = True
        for opened in (self._conn, self._watch):
            if opened is not None:
                opened.close()
        self._conn = self._watch = None


def _refuse_links(slug: str, path: Path) -> None:
    """BoardUnavailable for a board file with more than one name (a hard link).

    Another home may serve the same file: every task would run there too, with the
    same run ids, and each name keeps its own ``-wal`` file, so the two corrupt it.
    ``os.stat`` opens nothing, so this never touches SQLite's locks.
    """
    links = path.stat().st_nlink
    if links > 1:
        raise BoardUnavailable(
            f"board {slug!r} ({path}) has {links} hard links: another home may serve the same "
            "file, which would run every task twice and corrupt it; give each home a board "
            f"of its own and remove the other names (find / -xdev -samefile {path})"
        )


class SqliteStore:
    """Boards as ``<slug>.db`` files in one directory; opened lazily and kept open."""

    def __init__(
        self, boards_dir: Path, failure_limit: int = 3, clock: Clock = time.time,
        wait_budget: float = retry.DEFAULT_BUDGET,
    ) -> None:
        self._dir = boards_dir
        self._failure_limit = failure_limit
        self._clock = clock
        self._budget = wait_budget
        self._boards: dict[str, tuple[SqlBoard, SqliteFile]] = {}
        self._reported: set[str] = set()
        self._lock = threading.Lock()
        self._dir_stamp = self._stamp()
        self._watch: DirectoryWatch | None = None

    def _path(self, slug: str) -> Path:
        return self._dir / f"{check_name('board', slug)}.db"

    def create_board(self, slug: str) -> SqlBoard:
        path = self._path(slug)
        files.ensure_directory(self._dir)  # 0700 whatever the umask, the home too if it is new
        try:
            # O_EXCL: of two concurrent creators exactly one wins; an empty file is a
            # valid empty database that the first open migrates.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise UsageError(f"board {slug!r} already exists") from None
        return self.board(slug)

    def board(self, slug: str) -> SqlBoard:
        path = self._path(slug)
        with self._lock:
            opened = self._boards.get(slug)
            if opened is not None:
                return opened[0]
            if not path.is_file():
                raise NotFound(
                    f"no board {slug!r}{suggest.hint(slug, self.board_slugs())}; "
                    f"create it with 'lane-runner board create {slug}'"
                )
            try:
                _refuse_links(slug, path)
                file = SqliteFile(slug, path, self._clock, self._budget)
            except BoardUnavailable as error:
                self._report(slug, error)
                raise
            self._reported.discard(slug)
            self._boards[slug] = (SqlBoard(slug, file, self._failure_limit), file)
            return self._boards[slug][0]

    def delete_board(self, slug: str, *, force: bool = False) -> int:
        """Empty the board in one transaction (``SqlBoard.clear``: refused while a task
        runs, or unless ``force`` while one is not archived), then remove its file. Our
        connections to it are closed first: SQLite's locks must never be dropped by a
        close outside SQLite (docs/ARCHITECTURE.md §5), and unlinking opens nothing."""
        deleted = self.board(slug).clear(force=force)
        with self._lock:
            _, file = self._boards.pop(slug)
        file.close()
        path = self._path(slug)
        for name in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
            name.unlink(missing_ok=True)
        return deleted

    def _report(self, slug: str, error: BoardUnavailable) -> None:
        """Log a broken board once, not on every tick that skips it."""
        if slug not in self._reported:
            self._reported.add(slug)
            log.error("%s; skipping it, the other boards keep working", error)

    def board_slugs(self) -> list[str]:
        try:
            entries = list(os.scandir(self._dir))
        except FileNotFoundError:
            return []
        names = [entry.name for entry in entries if entry.is_file(follow_symlinks=False)]
        for entry in entries:
            if entry.name.endswith(".db") and not entry.is_file(follow_symlinks=False):
                # A link or special file is never opened as a board: SQLite would follow it.
                log.warning("%s is not a regular file; not served as a board", entry.path)
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
            files = [(slug, file) for slug, (_, file) in self._boards.items()]
        for slug, file in files:
            try:
                changed = file.changed() or changed
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
        if timeout > 0 and self._watch is None:
            self._watch = DirectoryWatch(self._dir)  # before the first look: no write slips by
        return wait_for_commit(lambda: self._watch, self._changed, timeout, SETTLE_LOOKS)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        with self._lock:
            files, self._boards = [file for _, file in self._boards.values()], {}
        for file in files:
            file.close()
