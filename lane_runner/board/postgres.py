"""The shared board store: boards as rows in one PostgreSQL database (docs/ARCHITECTURE.md §5).

Several runners, each in its own pod, work one board here. The transactions are
``board/sql.py``'s; this module holds what is PostgreSQL's own: the schema, the
connection pool, the board lock, run ids and change notification.

Two locks, taken in this order (``board/sql.py`` says why): a task's row,
``FOR NO KEY UPDATE`` (a claim's pick with ``SKIP LOCKED``, so runners claiming at
once take different tasks instead of queueing on one), and the board's row in
``boards`` (``FOR NO KEY UPDATE``, a claim's by the ``UPDATE`` of its run
counter), taken before a transition reads another task's state or writes an
event, and kept to its commit. Event ids (handed out by one
sequence) therefore follow commit order, so a reader following
``events(after_id)`` never skips an event that committed after a
later-numbered one. The board's row holds the run counter, so run ids increase
per board. A transition that promotes children updates their rows under the
board lock, while an archive of such a child holds the child's row and waits for
the board lock: PostgreSQL detects that deadlock and aborts one, which the retry
layer runs again. Heartbeats and comments change no task and take neither lock;
a heartbeat racing a transition waits for the run's row and then re-checks its
guard.

Transactions run at READ COMMITTED: a statement issued after a lock was granted
sees everything committed before it, and a locking ``SELECT`` re-checks its
conditions on the latest version of the rows it waited for.

Waits are bounded (``board/retry.py``): each transaction waits for a pooled
connection and for row locks (``lock_timeout``) only as long as the operation's
budget has left, and serialisation failures, deadlocks and lock timeouts are
retried within it.

Wake-ups: every transaction that changes a task's status sends ``NOTIFY`` on one
channel, and a dedicated connection per store listens. The payload names the
sending store, so a store ignores its own notifications: it already knows about
its own commits the moment they return.

Outages: connection errors (refused, reset, admin shutdown, pool timeout) surface
as ``BoardUnavailable``; the pool drops broken connections and reconnects with
its own backoff, and the listening connection reconnects with backoff too.

One clock: every time the board records (lease stamps and expiry, cooldowns,
events) is the database server's ``clock_timestamp()``, never a runner's, so a
pod whose clock is minutes off neither loses its live runs to others' rescues
nor keeps a dead node's runs past their lease. (Tests may hand the store a clock
of their own to move time by hand.)
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from lane_runner.board import retry
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import Outcome, Status
from lane_runner.board.sql import (
    BUDGET_COLUMNS,
    BUDGET_KIND,
    CONTROLS_STEP,
    FIRST_BLOCK_KINDS,
    BoardLock,
    Notify,
    SqlBoard,
    Work,
    pyformat,
    upgrade,
)
from lane_runner.board.sql import Connection as AnyConnection
from lane_runner.errors import NotFound, UsageError
from lane_runner.names import check_name

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]
SERVER_CLOCK = "extract(epoch FROM clock_timestamp())::float8"  # the one clock of every pod
Connection = psycopg.Connection[DictRow]

CHANNEL = "lane_runner_board"
MIGRATION_LOCK = 0x6C616E65  # advisory lock id: one runner at a time upgrades the schema
CONNECT_TIMEOUT = 5  # seconds; libpq's own connect timeout
MIN_WAIT = 0.01  # seconds; the shortest pool or lock wait an attempt asks for
# Server-side limits on every pooled session. A runner that vanishes mid-transaction
# (pod gone, network cut without a FIN) would otherwise keep its row locks, the
# board's lock among them, until the kernel's two-hour keepalive: every runner's
# transitions would wait that long. Board transactions never idle between
# statements, so the server may end any session that does, and probes the peer.
SESSION_OPTIONS = (
    "-c idle_in_transaction_session_timeout=10s "
    "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"
)
LISTEN_BACKOFF = (0.5, 1.0, 2.0, 5.0)  # reconnect delays of the listening connection


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


#: The first step's block kinds; the budget step widens the check.
_KINDS = _in(FIRST_BLOCK_KINDS)


def _one_of(values: type[StrEnum]) -> str:
    return "(" + ", ".join(f"'{member.value}'" for member in values) + ")"


# Forward migrations: step n brings the database from version n to n + 1. Append
# steps; never edit a released one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE schema_version (version integer NOT NULL)",
        "INSERT INTO schema_version VALUES (0)",
        """CREATE TABLE boards (
            slug text PRIMARY KEY,
            next_run_id bigint NOT NULL DEFAULT 0,
            created_at double precision NOT NULL
        )""",
        f"""CREATE TABLE tasks (
            board text NOT NULL REFERENCES boards (slug),
            id text NOT NULL,
            seq bigint GENERATED ALWAYS AS IDENTITY,
            title text NOT NULL,
            body text NOT NULL,
            status text NOT NULL CHECK (status IN {_one_of(Status)}),
            assignee text,
            priority integer NOT NULL,
            workspace text,
            max_runtime double precision CHECK (max_runtime IS NULL OR max_runtime > 0),
            goal_turns integer NOT NULL CHECK (goal_turns >= 1),
            current_run_id bigint,
            completed_run_id bigint,
            next_attempt_at double precision,
            block_reason text,
            block_kind text CHECK (block_kind IS NULL OR block_kind IN {_KINDS}),
            summary text,
            result text,
            failure_count integer NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            PRIMARY KEY (board, id),
            CHECK ((status = 'running') = (current_run_id IS NOT NULL)),
            CHECK ((status = 'blocked') = (block_kind IS NOT NULL))
        )""",
        "CREATE INDEX tasks_claimable ON tasks (board, priority DESC, created_at, seq) "
        "WHERE status = 'ready'",
        "CREATE INDEX tasks_current_run ON tasks (board, current_run_id) "
        "WHERE current_run_id IS NOT NULL",
        """CREATE TABLE task_links (
            board text NOT NULL,
            task_id text NOT NULL,
            parent_id text NOT NULL,
            position integer NOT NULL,
            PRIMARY KEY (board, task_id, parent_id),
            FOREIGN KEY (board, task_id) REFERENCES tasks (board, id),
            FOREIGN KEY (board, parent_id) REFERENCES tasks (board, id),
            CHECK (task_id <> parent_id)
        )""",
        "CREATE INDEX task_links_parent ON task_links (board, parent_id)",
        f"""CREATE TABLE runs (
            board text NOT NULL,
            id bigint NOT NULL,
            task_id text NOT NULL,
            node text NOT NULL,
            claimed_at double precision NOT NULL,
            lease_expires_at double precision NOT NULL,
            heartbeat_at double precision NOT NULL,
            ended_at double precision,
            outcome text CHECK (outcome IS NULL OR outcome IN {_one_of(Outcome)}),
            reason text,
            PRIMARY KEY (board, id),
            FOREIGN KEY (board, task_id) REFERENCES tasks (board, id),
            CHECK ((ended_at IS NULL) = (outcome IS NULL))
        )""",
        "CREATE INDEX runs_task ON runs (board, task_id, id)",
        "CREATE INDEX runs_open ON runs (board, node, id) WHERE ended_at IS NULL",
        """CREATE TABLE events (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            board text NOT NULL,
            task_id text NOT NULL,
            kind text NOT NULL,
            run_id bigint,
            at double precision NOT NULL,
            data text NOT NULL,
            FOREIGN KEY (board, task_id) REFERENCES tasks (board, id)
        )""",
        "CREATE INDEX events_board ON events (board, id)",
        "CREATE INDEX events_task ON events (board, task_id, id)",
        """CREATE FUNCTION lane_runner_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'events are append-only'; END $$""",
        """CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
           FOR EACH ROW EXECUTE FUNCTION lane_runner_append_only()""",
        """CREATE TABLE comments (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            board text NOT NULL,
            task_id text NOT NULL,
            author text NOT NULL,
            body text NOT NULL,
            at double precision NOT NULL,
            FOREIGN KEY (board, task_id) REFERENCES tasks (board, id)
        )""",
        "CREATE INDEX comments_task ON comments (board, task_id, id)",
    ),
    CONTROLS_STEP,
    # Deleting a task (or a board): events stay append-only while their task lives, and
    # go with it once it is archived (``SqlBoard.delete``).
    (
        """CREATE OR REPLACE FUNCTION lane_runner_append_only() RETURNS trigger
           LANGUAGE plpgsql AS $$
           BEGIN
             IF TG_OP = 'DELETE' AND EXISTS (
                 SELECT 1 FROM tasks WHERE board = OLD.board AND id = OLD.task_id
                 AND status = 'archived') THEN
               RETURN OLD;
             END IF;
             RAISE EXCEPTION 'events are append-only';
           END $$""",
    ),
    (
        "ALTER TABLE tasks DROP CONSTRAINT tasks_block_kind_check",
        "ALTER TABLE tasks ADD CONSTRAINT tasks_block_kind_check CHECK "
        f"(block_kind IS NULL OR block_kind IN {_in((*FIRST_BLOCK_KINDS, BUDGET_KIND))})",
        *BUDGET_COLUMNS,
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


def describe(url: str) -> str:
    """``host:port/dbname`` of a connection URL: enough to find it, never its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured board_url"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def _session_options(url: str) -> str:
    """The URL's own ``options`` (if any) followed by ``SESSION_OPTIONS``."""
    own = str(conninfo_to_dict(url).get("options") or "")
    return f"{own} {SESSION_OPTIONS}".strip()


def _is_transient(error: Exception) -> bool:
    """Serialisation failures, deadlocks and lock timeouts: a retry may well succeed."""
    return isinstance(error, pg_errors.TransactionRollback | pg_errors.LockNotAvailable)


class Database:
    """The pool, the transaction runner and the schema: what every board of a store shares."""

    def __init__(self, url: str, pool_size: int, budget: float) -> None:
        self.where = describe(url)
        self.token = secrets.token_hex(8)  # names this store in its NOTIFY payloads
        self.changed = threading.Event()  # set after this store commits a status change
        self._budget = budget
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={
                "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT,
                "row_factory": dict_row,
                "options": _session_options(url),
            },
            check=ConnectionPool.check_connection,  # a restart leaves dead pooled connections
            name="lane-runner-board",
            open=True,
        )

    def unavailable(self, error: Exception) -> BoardUnavailable:
        return BoardUnavailable(
            f"the PostgreSQL board store at {self.where} is unavailable: "
            f"{str(error).strip() or type(error).__name__}; work resumes when it is back"
        )

    def transaction(self, work: Work[T], *, write: bool, notify: Notify[T] = None) -> T:
        """Run ``work`` in one transaction; ``notify(value)`` true → NOTIFY in it.

        ``work`` only touches the database, so re-running it after a rollback is
        safe. Connection trouble is not retried here: a commit whose answer was
        lost may have happened, and the callers' exact-run guards settle that.
        """
        try:
            return retry.bounded(
                lambda remaining: self._attempt(work, write, notify, remaining),
                transient=_is_transient,
                budget=self._budget,
                what=f"the board store at {self.where}",
            )
        except psycopg.DataError as error:
            raise UsageError(f"the board database refused a value: {error}") from error
        except psycopg.IntegrityError:
            raise
        except psycopg.Error as error:
            raise self.unavailable(error) from error

    def _attempt(
        self,
        work: Work[T],
        write: bool,
        notify: Notify[T],
        remaining: float,
    ) -> T:
        with self._pool.connection(timeout=max(MIN_WAIT, remaining)) as connection:
            self._ensure_schema(connection)
            with connection.transaction():
                if write:  # reads never wait for row locks
                    milliseconds = max(MIN_WAIT, remaining) * 1000
                    connection.execute(
                        "SELECT set_config('lock_timeout', %s, true)", (f"{milliseconds:.0f}ms",)
                    )
                value = work(connection)
                notified = notify is not None and notify(value)
                if notified:
                    connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self.token))
        if notified:
            self.changed.set()
        return value

    def _ensure_schema(self, connection: Connection) -> None:
        if self._schema_ready:
            return
        with self._schema_lock:
            if not self._schema_ready:
                with connection.transaction():
                    self._migrate(connection)
                self._schema_ready = True

    def _migrate(self, connection: Connection) -> None:
        """Apply the missing steps; the advisory lock makes concurrent starters take turns."""
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        exists = connection.execute("SELECT to_regclass('schema_version') AS t").fetchone()
        version = 0
        if exists is not None and exists["t"] is not None:
            row = connection.execute("SELECT version FROM schema_version").fetchone()
            version = row["version"] if row is not None else 0
        if upgrade(connection, version, MIGRATIONS, f"the board database at {self.where}"):
            connection.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))
            log.info("board database %s migrated to schema %d", self.where, SCHEMA_VERSION)

    def close(self) -> None:
        self._pool.close()


def database_now(connection: AnyConnection) -> float:
    """The database server's wall clock, seconds since the epoch: the one clock of every pod."""
    query = f"SELECT {SERVER_CLOCK} AS now"
    row = connection.execute(query).fetchone()
    return float(row["now"])


class PostgresBoardDialect:
    """One board's view of the database: the dialect ``SqlBoard`` runs its transactions through."""

    insertion_order = "seq"

    def __init__(self, slug: str, database: Database, clock: Clock | None) -> None:
        self.scope = slug
        self.transaction = database.transaction
        self._clock = clock

    def sql(self, statement: str) -> str:
        return pyformat(statement)

    def lock_board(self, connection: AnyConnection, *, new_run: bool = False) -> BoardLock:
        """The board's row, locked (a claim's by the update that takes its run id from the
        counter), and the server's clock, read once the lock is granted."""
        board = connection.execute(
            "UPDATE boards SET next_run_id = next_run_id + 1 WHERE slug = %s "
            f"RETURNING next_run_id, {SERVER_CLOCK} AS now"
            if new_run
            else f"SELECT {SERVER_CLOCK} AS now FROM boards WHERE slug = %s FOR NO KEY UPDATE",
            (self.scope,),
        ).fetchone()
        if board is None:
            raise NotFound(f"board {self.scope!r} no longer exists")
        now = float(board["now"]) if self._clock is None else self._clock()
        return BoardLock(now, int(board["next_run_id"]) if new_run else None)

    def lock_rows(self, *, skip_locked: bool = False) -> str:
        """``FOR NO KEY UPDATE``: it keeps out other transitions of the task, not the rows
        (events, runs, comments) that only refer to it."""
        return " FOR NO KEY UPDATE SKIP LOCKED" if skip_locked else " FOR NO KEY UPDATE"

    def clock(self) -> tuple[str, float | None]:
        """The server's clock, read by the statement itself: no round trip of its own."""
        if self._clock is not None:
            return ":now", self._clock()
        return SERVER_CLOCK, None

    def now(self, connection: AnyConnection) -> float:
        """The server's clock at this statement (after the board lock was granted)."""
        if self._clock is not None:
            return self._clock()
        return database_now(connection)

    def close(self) -> None:
        """Nothing to release: connections belong to the store's pool."""


class Listener:
    """The dedicated ``LISTEN`` connection behind ``wait_for_change``.

    Used from one thread (the daemon's loop). While it is down it reconnects with
    a backoff, and a reconnection reports a change: notifications sent while
    nobody listened are lost, so the caller should look at the boards once.
    """

    def __init__(self, url: str, database: Database) -> None:
        self._url = url
        self._database = database
        self._connection: psycopg.Connection[Any] | None = None
        self._failures = 0
        self._retry_at = 0.0

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if self._connection is None and time.monotonic() >= self._retry_at and self.connect():
                return True
            if self._connection is not None and self._heard_others(
                max(0.0, deadline - time.monotonic())
            ):
                return True
            if time.monotonic() >= deadline:
                return False
            if self._connection is None:
                time.sleep(max(0.0, min(deadline, self._retry_at) - time.monotonic()))

    def _heard_others(self, timeout: float) -> bool:
        """True when another store's notification arrived within ``timeout`` (or we went deaf)."""
        assert self._connection is not None
        try:
            for notification in self._connection.notifies(timeout=timeout, stop_after=1):
                if notification.payload != self._database.token:
                    return True
        except psycopg.Error as error:
            log.warning("board change listener lost (%s); reconnecting", error)
            self._drop()
            return True
        return False

    def connect(self) -> bool:
        """Open and LISTEN; on failure schedule the next attempt (backoff) and say False."""
        try:
            self._connection = psycopg.connect(
                self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            )
            self._connection.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as error:
            self._drop()
            delay = LISTEN_BACKOFF[min(self._failures, len(LISTEN_BACKOFF) - 1)]
            self._failures += 1
            self._retry_at = time.monotonic() + delay
            log.warning(
                "cannot listen for board changes at %s (%s); retrying in %.1fs",
                self._database.where,
                str(error).strip(),
                delay,
            )
            return False
        self._failures = 0
        return True

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None

    def close(self) -> None:
        self._drop()


class PostgresStore:
    """Boards as rows of one database; any number of runners may open it at once."""

    def __init__(
        self,
        url: str,
        failure_limit: int = 3,
        clock: Clock | None = None,
        pool_size: int = 4,
        wait_budget: float = retry.DEFAULT_BUDGET,
    ) -> None:
        self._failure_limit = failure_limit
        self._clock = clock
        self._db = Database(url, pool_size, wait_budget)
        self._listener = Listener(url, self._db)
        self._listener.connect()  # a failure here is retried by wait_for_change
        self._boards: dict[str, SqlBoard] = {}
        self._known_slugs: list[str] | None = None
        self._lock = threading.Lock()

    def _open(self, slug: str) -> SqlBoard:
        with self._lock:
            opened = self._boards.get(slug)
            if opened is None:
                dialect = PostgresBoardDialect(slug, self._db, self._clock)
                opened = self._boards[slug] = SqlBoard(slug, dialect, self._failure_limit)
            return opened

    def create_board(self, slug: str) -> SqlBoard:
        check_name("board", slug)

        def work(connection: AnyConnection) -> bool:
            row = connection.execute(
                "INSERT INTO boards (slug, created_at) VALUES (%s, %s) "
                "ON CONFLICT (slug) DO NOTHING RETURNING slug",
                (slug, database_now(connection) if self._clock is None else self._clock()),
            ).fetchone()
            return row is not None

        if not self._db.transaction(work, write=True, notify=bool):
            raise UsageError(f"board {slug!r} already exists")
        return self._open(slug)

    def board(self, slug: str) -> SqlBoard:
        check_name("board", slug)
        with self._lock:
            opened = self._boards.get(slug)
        if opened is not None:
            return opened
        exists = self._db.transaction(
            lambda c: c.execute("SELECT 1 FROM boards WHERE slug = %s", (slug,)).fetchone(),
            write=False,
        )
        if exists is None:
            raise NotFound(f"no board {slug!r}; create it with 'lane-runner board create {slug}'")
        return self._open(slug)

    def delete_board(self, slug: str, *, force: bool = False) -> int:
        """The board's rows and the board itself, in one transaction (``SqlBoard.clear``:
        refused while a task runs, or unless ``force`` while one is not archived)."""
        deleted = self.board(slug).clear(
            force=force, also=("DELETE FROM boards WHERE slug = :board",)
        )
        with self._lock:
            self._boards.pop(slug, None)
        return deleted

    def board_slugs(self) -> list[str]:
        """Every board's slug; during an outage, the last list this store saw.

        The daemon and recovery walk boards one by one and handle ``BoardUnavailable``
        per board, so a store-wide outage then looks like every board being down
        rather than stopping the loop. A store that never reached the database has
        no list to fall back on and raises.
        """
        try:
            rows = self._db.transaction(
                lambda c: c.execute("SELECT slug FROM boards").fetchall(), write=False
            )
        except BoardUnavailable as error:
            if self._known_slugs is None:
                raise
            log.warning("%s; using the last known boards", error)
            return list(self._known_slugs)
        self._known_slugs = sorted(row["slug"] for row in rows)
        return list(self._known_slugs)

    def wait_for_change(self, timeout: float) -> bool:
        """Block up to ``timeout`` s; True once a board changed (``timeout`` 0: just look).

        This store's own status changes count at once; other runners' arrive as
        notifications on the listening connection.
        """
        if self._db.changed.is_set():
            self._db.changed.clear()
            return True
        return self._listener.wait(timeout)

    def close(self) -> None:
        self._listener.close()
        self._db.close()
