"""The PostgreSQL board database: the pool, the transaction runner and the schema's upgrade,
what every board of a store shares.

Waits are bounded (``board/retry.py``): each transaction waits for a pooled connection
and for row locks (``lock_timeout``) only as long as the operation's budget has left,
and serialisation failures, deadlocks and lock timeouts are retried within it.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from lane_runner.board import retry
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from lane_runner.board.sql.dialect import Connection as AnyConnection
from lane_runner.board.sql.dialect import Notify, Work
from lane_runner.board.sql.schema import upgrade
from lane_runner.errors import NotFound, UsageError

log = logging.getLogger(__name__)
T = TypeVar("T")

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
CHECK_IDLE = 5.0  # seconds; a pooled connection idle longer is checked with a round trip
LOCK_LIMIT = "SELECT set_config('lock_timeout', %s, true)"
# Through a transaction pooler the session options cannot be sent at connect: a write
# transaction sets the one that matters for its own life, with its lock timeout.
POOLED_LIMITS = (
    "SELECT set_config('lock_timeout', %s, true), "
    "set_config('idle_in_transaction_session_timeout', '10s', true)"
)


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


