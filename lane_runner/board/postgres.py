"""The shared board store: boards as rows in one PostgreSQL database (docs/ARCHITECTURE.md §5).

Several runners, each in its own pod, work one board here. The transactions are
``board/sql/``'s; this module holds what is PostgreSQL's own: the schema, the
connection pool, the board's gate, run ids and change notification.

Two locks, taken in this order (``board/sql/`` says why): a task's row,
``FOR NO KEY UPDATE`` (a claim's pick with ``SKIP LOCKED``, so runners claiming at
once take different tasks instead of queueing on one), and the board's gate, an
advisory lock on the board's name taken before a transition reads another task's
state or writes an event and kept to its commit: shared by claims and completions
(the functions of ``board/pg_transitions.py``, which says what that changes),
exclusive for every other transition (``PostgresBoardDialect.lock_board``). Run
ids come from one sequence; a reader of ``events`` reads up to the board's settled
id, so it never skips an event that committed after a later-numbered one. A
transition that promotes children updates their rows under the gate, while an
archive of such a child holds the child's row and waits for the gate: PostgreSQL
detects that deadlock and aborts one, which the retry layer runs again.
Heartbeats and comments change no task and take neither lock; a heartbeat racing
a transition waits for the run's row and then re-checks its guard.

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
import weakref
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from lane_runner import suggest
from lane_runner.board import retry
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import Outcome, Status
from lane_runner.board.pg_transitions import GATE_STEP, SKIP_STEP, TRANSITIONS, PostgresBoard
from lane_runner.board.sql.board import SqlBoard
from lane_runner.board.sql.dialect import BoardLock, Notify, Work, pyformat
from lane_runner.board.sql.dialect import Connection as AnyConnection
from lane_runner.board.sql.schema import (
    BUDGET_COLUMNS,
    BUDGET_KIND,
    CONTROLS_STEP,
    FIRST_BLOCK_KINDS,
    USAGE_STEP,
    upgrade,
)
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
CHECK_IDLE = 5.0  # seconds; a pooled connection idle longer is checked with a round trip
POLL_INTERVAL = 1.0  # seconds between looks at the boards where nobody can LISTEN
DEFAULT_CONNECTIONS = 3  # per runner: one LISTEN connection and a pool of two
LOCK_LIMIT = "SELECT set_config('lock_timeout', %s, true)"
# Through a transaction pooler the session options cannot be sent at connect: a write
# transaction sets the one that matters for its own life, with its lock timeout.
POOLED_LIMITS = (
    "SELECT set_config('lock_timeout', %s, true), "
    "set_config('idle_in_transaction_session_timeout', '10s', true)"
)


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
    # Claim, heartbeat and completion as server-side functions (``board/pg_transitions.py``):
    # their current definitions, which every later step that changes them installs again.
    TRANSITIONS,
    # The board gate and run ids from a sequence: claims and completions side by side.
    GATE_STEP,
    # The usage ledger every runner of a board shares (``SharedLedger``).
    USAGE_STEP,
    # The claim passes over the workspaces the storm breaker marks broken.
    SKIP_STEP,
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


def _milliseconds(remaining: float) -> str:
    """A lock timeout of what is left of the budget, as PostgreSQL reads it."""
    return f"{max(MIN_WAIT, remaining) * 1000:.0f}ms"


def _is_transient(error: Exception) -> bool:
    """Serialisation failures, deadlocks and lock timeouts: a retry may well succeed."""
    return isinstance(error, pg_errors.TransactionRollback | pg_errors.LockNotAvailable)


class Database:
    """The pool, the transaction runner and the schema: what every board of a store shares.

    ``pooled``: the URL goes through a pooler in transaction mode (PgBouncer), where a
    session is not ours from one transaction to the next: nothing is set per session
    (the session options go into each write transaction instead) and nothing is
    prepared (a prepared statement lives in one server session).
    """

    def __init__(self, url: str, pool_size: int, budget: float, *, pooled: bool = False) -> None:
        self.where = describe(url)
        self.token = secrets.token_hex(8)  # names this store in its NOTIFY payloads
        self.changed = threading.Event()  # set after this store commits a status change
        self._budget = budget
        self._pooled = pooled
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        self._returned: weakref.WeakKeyDictionary[Connection, float] = (
            weakref.WeakKeyDictionary()
        )
        connect: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": CONNECT_TIMEOUT,
            "row_factory": dict_row,
        }
        if pooled:
            connect["prepare_threshold"] = None
        else:
            connect["options"] = _session_options(url)
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs=connect,
            check=self._check,
            reset=self._note_returned,
            name="lane-runner-board",
            open=True,
        )

    def _note_returned(self, connection: Connection) -> None:
        """The pool's reset hook: when the connection last answered us (no round trip)."""
        self._returned[connection] = time.monotonic()

    def _check(self, connection: Connection) -> None:
        """A round trip only for a connection idle longer than ``CHECK_IDLE``.

        A server restart leaves dead pooled connections; one that answered within
        the last seconds is taken as it is (a dead one fails its statement, surfaces
        as BoardUnavailable once and is dropped by the pool), so a busy runner's
        transitions carry no check of their own.
        """
        returned = self._returned.get(connection)
        if returned is None or time.monotonic() - returned > CHECK_IDLE:
            ConnectionPool.check_connection(connection)

    def unavailable(self, error: Exception) -> BoardUnavailable:
        return BoardUnavailable(
            f"the PostgreSQL board store at {self.where} is unavailable: "
            f"{str(error).strip() or type(error).__name__}; work resumes when it is back"
        )

    def _bounded(self, attempt: Callable[[float], T]) -> T:
        """``attempt(remaining)`` retried within the budget; storage errors as the contract's."""
        try:
            return retry.bounded(
                attempt,
                transient=_is_transient,
                budget=self._budget,
                what=f"the board store at {self.where}",
            )
        except pg_errors.NoDataFound as error:  # a function's 'board no longer exists'
            raise NotFound(str(error).strip()) from error
        except psycopg.DataError as error:
            raise UsageError(f"the board database refused a value: {error}") from error
        except psycopg.IntegrityError:
            raise
        except psycopg.Error as error:
            raise self.unavailable(error) from error

    def transaction(self, work: Work[T], *, write: bool, notify: Notify[T] = None) -> T:
        """Run ``work`` in one transaction; ``notify(value)`` true → NOTIFY in it.

        ``work`` only touches the database, so re-running it after a rollback is
        safe. Connection trouble is not retried here: a commit whose answer was
        lost may have happened, and the callers' exact-run guards settle that.
        """
        return self._bounded(lambda remaining: self._attempt(work, write, notify, remaining))

    def call(
        self,
        query: str,
        params: dict[str, Any],
        changed: Callable[[DictRow], bool] | None = None,
    ) -> DictRow | None:
        """One statement (a function call) as its own transaction: one round trip.

        ``query`` may use ``%(lock_timeout)s`` (this attempt's share of the budget),
        ``%(channel)s`` and ``%(token)s`` (for a NOTIFY the function sends). Its first
        row is returned; ``changed(row)`` true wakes this store's own daemon.
        """

        def attempt(remaining: float) -> DictRow | None:
            with self._pool.connection(timeout=max(MIN_WAIT, remaining)) as connection:
                self._ensure_schema(connection)
                row: DictRow | None = connection.execute(
                    query,
                    {
                        **params,
                        "lock_timeout": _milliseconds(remaining),
                        "channel": CHANNEL,
                        "token": self.token,
                    },
                ).fetchone()
                return row

        row = self._bounded(attempt)
        if row is not None and changed is not None and changed(row):
            self.changed.set()
        return row

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
                    connection.execute(
                        POOLED_LIMITS if self._pooled else LOCK_LIMIT,
                        (_milliseconds(remaining),),
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
        self._call = database.call
        self._clock = clock

    def sql(self, statement: str) -> str:
        return pyformat(statement)

    def lock_board(self, connection: AnyConnection, *, new_run: bool = False) -> BoardLock:
        """The board's gate, exclusive (``board/pg_transitions.py``), and the server's clock
        read once it is granted; with ``new_run``, the next run id from the sequence."""
        board = connection.execute(
            "SELECT * FROM lane_runner_lock_board(%s, false, %s)", (self.scope, new_run)
        ).fetchone()
        if board["locked_at"] is None:
            raise NotFound(f"board {self.scope!r} no longer exists")
        now = float(board["locked_at"]) if self._clock is None else self._clock()
        return BoardLock(now, int(board["run_id"]) if new_run else None)

    def settled_events(self) -> int:
        """The board's last event id once no event of it is in flight: every event at or
        below it has committed, whatever order the claims and completions committed in."""
        row = self._call(
            "SELECT lane_runner_settled_events(%(board)s, %(lock_timeout)s) AS last",
            {"board": self.scope},
        )
        assert row is not None  # the function returns one value
        return int(row["last"])

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
        self._closed = False  # closed on purpose (the store is closing): no more listening

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._closed:
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
        return False

    def _heard_others(self, timeout: float) -> bool:
        """True when another store's notification arrived within ``timeout`` (or we went deaf)."""
        assert self._connection is not None
        try:
            for notification in self._connection.notifies(timeout=timeout, stop_after=1):
                if notification.payload != self._database.token:
                    return True
        except psycopg.Error as error:
            if self._closed:  # a clean stop closed it under the waiting thread
                log.debug("board change listener closed: %s", error)
                return False
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
        self._closed = True
        self._drop()


class Poller:
    """Wake-ups where nobody can LISTEN: a look at the boards every ``POLL_INTERVAL``.

    A pooler in transaction mode hands each transaction whichever server session is
    free, so a ``LISTEN`` there hears nothing reliably. Without a direct address
    to listen on, ``wait_for_change`` reports a change once per interval, so the
    daemon looks again: a change waits at most that long, never forever.
    """

    def __init__(self, interval: float = POLL_INTERVAL) -> None:
        self._interval = interval
        self._due = time.monotonic() + interval

    def looked(self) -> None:
        """The caller is looking at the boards now: the next look is due an interval later."""
        self._due = time.monotonic() + self._interval

    def wait(self, timeout: float) -> bool:
        wait = self._due - time.monotonic()
        if wait > timeout:
            time.sleep(max(0.0, timeout))
            return False
        time.sleep(max(0.0, wait))
        self.looked()
        return True

    def close(self) -> None:
        """Nothing held."""


class PostgresStore:
    """Boards as rows of one database; any number of runners may open it at once.

    ``connections`` bounds what this store holds on the server (or the pooler):
    one for ``LISTEN`` where it listens, the rest its pool. ``pooled``: ``url``
    goes through a pooler in transaction mode; then it listens on ``listen_url``
    (a direct address of the server) if one is given, and polls if not (as it does
    with a budget of one connection). ``server_transitions`` false runs claim,
    heartbeat and completion through ``board/sql/``, the reference, as SQLite does.
    """

    def __init__(
        self,
        url: str,
        failure_limit: int = 3,
        clock: Clock | None = None,
        connections: int = DEFAULT_CONNECTIONS,
        wait_budget: float = retry.DEFAULT_BUDGET,
        *,
        pooled: bool = False,
        listen_url: str | None = None,
        server_transitions: bool = True,
    ) -> None:
        if connections < 1:
            raise UsageError(f"board_connections must be at least 1, not {connections}")
        self._failure_limit = failure_limit
        self._clock = clock
        self._server_transitions = server_transitions
        listen_at = listen_url or (None if pooled else url)
        listens = listen_at is not None and connections >= 2
        self._db = Database(url, connections - listens, wait_budget, pooled=pooled)
        self._listener: Listener | Poller
        if listen_at is not None and listens:
            self._listener = Listener(listen_at, self._db)
            self._listener.connect()  # a failure here is retried by wait_for_change
        else:
            self._listener = Poller()
        self._boards: dict[str, SqlBoard] = {}
        self._known_slugs: list[str] | None = None
        self._lock = threading.Lock()

    def _open(self, slug: str) -> SqlBoard:
        with self._lock:
            opened = self._boards.get(slug)
            if opened is None:
                dialect = PostgresBoardDialect(slug, self._db, self._clock)
                opened = self._boards[slug] = (
                    PostgresBoard(slug, dialect, self._failure_limit, self._db.call, self._clock)
                    if self._server_transitions
                    else SqlBoard(slug, dialect, self._failure_limit)
                )
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
            raise NotFound(
                f"no board {slug!r}{suggest.hint(slug, self.board_slugs())}; "
                f"create it with 'lane-runner board create {slug}'"
            )
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
            if isinstance(self._listener, Poller):
                self._listener.looked()
            return True
        return self._listener.wait(timeout)

    def close(self) -> None:
        self._listener.close()
        self._db.close()
