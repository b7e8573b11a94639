"""The shared board store: boards as rows in one PostgreSQL database (DESIGN §3.6, §5).

Several runners, each in its own pod, work one board here. PostgreSQL is the
arbiter: every transition is one transaction that locks the rows its guard reads
(``FOR UPDATE``), so two runners never both win. Claims take the board's run
counter row first, which hands out run ids that increase per board and keeps the
oldest-first order across runners; the chosen task row is then taken with
``SKIP LOCKED`` so a claim never waits behind another transition on that task.

Every transaction that records events takes the board's row first and keeps it
to its commit, so one board's event ids (handed out by one sequence) are in
commit order: a reader following ``events(after_id)`` never skips an event that
committed after a later-numbered one. Heartbeats and comments record none and
do not wait for it.

Transactions run at READ COMMITTED: a statement issued after a row lock was
granted sees everything committed before it. Promotion of children and adding a
child under a parent rely on that (they lock before they read the parents'
statuses), which is what keeps two completions from each thinking the other
parent is still running.

Wake-ups: every transaction that changes a task's status sends ``NOTIFY`` on one
channel, and a dedicated connection per store listens. The payload names the
sending store, so a store ignores its own notifications: it already knows about
its own commits the moment they return.

Outages: connection errors (refused, reset, admin shutdown, pool timeout) surface
as ``BoardUnavailable``; the pool drops broken connections and reconnects with
its own backoff, and the listening connection reconnects with backoff too. Times
are the runners' clocks (as in the embedded store), so pods need synchronised
clocks for leases to mean the same thing everywhere.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from lane_runner.board import rules
from lane_runner.board.base import BoardUnavailable
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
from lane_runner.names import check_name

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]
Connection = psycopg.Connection[DictRow]

CHANNEL = "lane_runner_board"
MIGRATION_LOCK = 0x6C616E65  # advisory lock id: one runner at a time upgrades the schema
CONNECT_TIMEOUT = 5  # seconds; libpq's own connect timeout
POOL_TIMEOUT = 2.0  # seconds to wait for a pooled connection before the board counts as down
RETRY_DELAYS = (0.02, 0.05, 0.1, 0.25, 0.5, 1.0)  # serialization failures and deadlocks
# Server-side limits on every pooled session. A runner that vanishes mid-transaction
# (pod gone, network cut without a FIN) would otherwise keep its row locks, the
# board's claim counter among them, until the kernel's two-hour keepalive: every
# runner's claims would wait that long. Board transactions never idle between
# statements, so the server may end any session that does, and probes the peer.
SESSION_OPTIONS = (
    "-c idle_in_transaction_session_timeout=10s "
    "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"
)
LISTEN_BACKOFF = (0.5, 1.0, 2.0, 5.0)  # reconnect delays of the listening connection


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
            block_kind text CHECK (block_kind IS NULL OR block_kind IN {_one_of(BlockKind)}),
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


def _json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


class Database:
    """The pool, the transaction runner and the schema: what every board of a store shares."""

    def __init__(self, url: str, pool_size: int) -> None:
        self.where = describe(url)
        self.token = secrets.token_hex(8)  # names this store in its NOTIFY payloads
        self.changed = threading.Event()  # set after this store commits a status change
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

    def transaction(
        self,
        work: Callable[[Connection], T],
        notify: bool | Callable[[T], bool] = False,
    ) -> T:
        """Run ``work`` in one transaction; ``notify`` (or ``notify(value)``) → NOTIFY in it.

        Serialization failures and deadlocks are retried with a bounded backoff:
        ``work`` only touches the database, so re-running it after a rollback is
        safe. Connection trouble is not retried here: a commit whose answer was
        lost may have happened, and the callers' exact-run guards settle that.
        """
        for delay in (*RETRY_DELAYS, None):
            try:
                with self._pool.connection(timeout=POOL_TIMEOUT) as connection:
                    self._ensure_schema(connection)
                    with connection.transaction():
                        value = work(connection)
                        notified = notify(value) if callable(notify) else notify
                        if notified:
                            connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self.token))
                if notified:
                    self.changed.set()
                return value
            except pg_errors.TransactionRollback as error:
                if delay is None:
                    raise self.unavailable(error) from error
                log.debug("board transaction rolled back (%s); retrying in %.2fs", error, delay)
            except psycopg.DataError as error:
                raise UsageError(f"the board database refused a value: {error}") from error
            except psycopg.IntegrityError:
                raise
            except psycopg.Error as error:
                raise self.unavailable(error) from error
            time.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

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
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"the board database at {self.where} has schema version {version}, newer than "
                f"this lane-runner knows ({SCHEMA_VERSION}); upgrade lane-runner"
            )
        for step in MIGRATIONS[version:]:
            for statement in step:
                connection.execute(statement)  # type: ignore[call-overload,unused-ignore]
        if version < SCHEMA_VERSION:
            connection.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))
            log.info("board database %s migrated to schema %d", self.where, SCHEMA_VERSION)

    def close(self) -> None:
        self._pool.close()


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


class PostgresBoard:
    """One board's rows. Methods are safe to call from several threads (pooled connections)."""

    def __init__(self, slug: str, database: Database, failure_limit: int, clock: Clock) -> None:
        self.slug = slug
        self._db = database
        self._failure_limit = failure_limit
        self._clock = clock

    # -- row access --------------------------------------------------------------

    def _parents(self, connection: Connection, task_id: str) -> tuple[str, ...]:
        rows = connection.execute(
            "SELECT parent_id FROM task_links WHERE board = %s AND task_id = %s ORDER BY position",
            (self.slug, task_id),
        )
        return tuple(row["parent_id"] for row in rows)

    def _task(self, connection: Connection, task_id: str, *, lock: bool = False) -> Task:
        query = "SELECT * FROM tasks WHERE board = %s AND id = %s"
        row = connection.execute(
            query + " FOR UPDATE" if lock else query, (self.slug, task_id)
        ).fetchone()
        if row is None:
            raise NotFound(
                f"no task {task_id!r} on board {self.slug!r}; "
                f"see 'lane-runner task ls --board {self.slug}'"
            )
        return task_from_row(row, self.slug, self._parents(connection, task_id))

    def _run(self, connection: Connection, run_id: int) -> Run:
        row = connection.execute(
            "SELECT * FROM runs WHERE board = %s AND id = %s", (self.slug, run_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id} on board {self.slug!r}")
        return run_from_row(row, self.slug)

    def _current(self, connection: Connection, run_id: int) -> tuple[DictRow, float] | None:
        """The task row whose current run is ``run_id`` (still running), locked, and now."""
        row = connection.execute(
            "SELECT * FROM tasks WHERE board = %s AND current_run_id = %s "
            "AND status = 'running' FOR UPDATE",
            (self.slug, run_id),
        ).fetchone()
        return (row, self._clock()) if row is not None else None

    def _recording(self, work: Callable[[Connection], T], notify: bool | Callable[[T], bool]) -> T:
        """A transaction that records events: the board's row is locked before anything
        else (so event ids follow commit order, and every such transaction takes its
        locks in the same order: the board first, then tasks and runs)."""

        def locked(connection: Connection) -> T:
            board = connection.execute(
                "SELECT 1 FROM boards WHERE slug = %s FOR NO KEY UPDATE", (self.slug,)
            ).fetchone()
            if board is None:
                raise NotFound(f"board {self.slug!r} no longer exists")
            return work(connection)

        return self._db.transaction(locked, notify=notify)

    def _event(
        self,
        connection: Connection,
        task_id: str,
        kind: EventKind,
        at: float,
        run_id: int | None = None,
        **data: Any,
    ) -> None:
        connection.execute(
            "INSERT INTO events (board, task_id, kind, run_id, at, data) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (self.slug, task_id, kind.value, run_id, at, _json(data)),
        )

    def _end_run(
        self, connection: Connection, run_id: int, outcome: Outcome, reason: str | None, at: float
    ) -> None:
        connection.execute(
            "UPDATE runs SET ended_at = %s, outcome = %s, reason = %s "
            "WHERE board = %s AND id = %s AND ended_at IS NULL",
            (at, outcome.value, reason, self.slug, run_id),
        )

    def _statuses(self, connection: Connection, task_ids: Sequence[str]) -> list[Status]:
        """The tasks' statuses, share-locked so a completing parent cannot slip past unseen."""
        statuses = []
        for task_id in task_ids:
            row = connection.execute(
                "SELECT status FROM tasks WHERE board = %s AND id = %s FOR SHARE",
                (self.slug, task_id),
            ).fetchone()
            if row is None:
                raise UsageError(
                    f"no parent task {task_id!r} on board {self.slug!r}: "
                    "parents must be tasks on the same board"
                )
            statuses.append(Status(row["status"]))
        return statuses

    # -- tasks -------------------------------------------------------------------

    def add_task(self, new: NewTask) -> Task:
        new = rules.checked_task(new)

        def work(connection: Connection) -> Task:
            task_id = new.id or self._fresh_id(connection)
            if rules.would_cycle(task_id, new.parents, lambda t: self._parents(connection, t)):
                raise UsageError(f"task {task_id!r} cannot be its own ancestor (parent cycle)")
            statuses = self._statuses(connection, new.parents)
            for parent, status in zip(new.parents, statuses, strict=True):
                if status is Status.ARCHIVED:
                    raise UsageError(
                        f"parent task {parent!r} is archived; a child of it would never run"
                    )
            now = self._clock()
            inserted = connection.execute(
                "INSERT INTO tasks (board, id, title, body, status, assignee, priority, "
                "workspace, max_runtime, goal_turns, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (board, id) DO NOTHING RETURNING id",
                (
                    self.slug, task_id, new.title, new.body,
                    rules.initial_status(statuses).value, new.assignee, new.priority,
                    new.workspace, new.max_runtime, new.goal_turns, now, now,
                ),
            ).fetchone()
            if inserted is None:
                raise UsageError(f"task {task_id!r} already exists on board {self.slug!r}")
            for position, parent in enumerate(new.parents):
                connection.execute(
                    "INSERT INTO task_links (board, task_id, parent_id, position) "
                    "VALUES (%s, %s, %s, %s)",
                    (self.slug, task_id, parent, position),
                )
            self._event(connection, task_id, EventKind.CREATED, now, title=new.title)
            return self._task(connection, task_id)

        return self._recording(work, notify=True)

    def _fresh_id(self, connection: Connection) -> str:
        while True:
            candidate = rules.new_task_id()
            taken = connection.execute(
                "SELECT 1 FROM tasks WHERE board = %s AND id = %s", (self.slug, candidate)
            ).fetchone()
            if taken is None:
                return candidate

    def get_task(self, task_id: str) -> Task:
        return self._db.transaction(lambda c: self._task(c, task_id))

    def list_tasks(self, status: Status | None = None) -> list[Task]:
        def work(connection: Connection) -> list[Task]:
            links: dict[str, list[str]] = {}
            for row in connection.execute(
                "SELECT task_id, parent_id FROM task_links WHERE board = %s "
                "ORDER BY task_id, position",
                (self.slug,),
            ):
                links.setdefault(row["task_id"], []).append(row["parent_id"])
            query = "SELECT * FROM tasks WHERE board = %s"
            parameters: tuple[str, ...] = (self.slug,)
            if status is not None:
                query += " AND status = %s"
                parameters += (Status(status).value,)
            rows = connection.execute(query + " ORDER BY created_at, seq", parameters)
            return [task_from_row(row, self.slug, tuple(links.get(row["id"], ()))) for row in rows]

        return self._db.transaction(work)

    def comment(self, task_id: str, body: str, author: str = "operator") -> Comment:
        rules.check_comment(body)

        def work(connection: Connection) -> Comment:
            self._task(connection, task_id)
            now = self._clock()
            row = connection.execute(
                "INSERT INTO comments (board, task_id, author, body, at) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (self.slug, task_id, author, body, now),
            ).fetchone()
            assert row is not None
            return Comment(row["id"], self.slug, task_id, author, body, now)

        return self._db.transaction(work)

    def comments(self, task_id: str, limit: int | None = None) -> list[Comment]:
        def work(connection: Connection) -> list[Comment]:
            self._task(connection, task_id)
            rows = connection.execute(
                "SELECT * FROM (SELECT * FROM comments WHERE board = %s AND task_id = %s "
                "ORDER BY id DESC LIMIT %s) latest ORDER BY id",
                (self.slug, task_id, limit),
            )
            return [
                Comment(r["id"], self.slug, r["task_id"], r["author"], r["body"], r["at"])
                for r in rows
            ]

        return self._db.transaction(work)

    def events(self, task_id: str | None = None, after_id: int = 0) -> list[Event]:
        def work(connection: Connection) -> list[Event]:
            if task_id is None:
                rows = connection.execute(
                    "SELECT * FROM events WHERE board = %s AND id > %s ORDER BY id",
                    (self.slug, after_id),
                )
            else:
                self._task(connection, task_id)
                rows = connection.execute(
                    "SELECT * FROM events WHERE board = %s AND task_id = %s AND id > %s "
                    "ORDER BY id",
                    (self.slug, task_id, after_id),
                )
            return [
                Event(
                    r["id"], self.slug, r["task_id"], r["kind"], r["run_id"], r["at"],
                    orjson.loads(r["data"]),
                )
                for r in rows
            ]

        return self._db.transaction(work)

    def runs(self, task_id: str) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            self._task(connection, task_id)
            rows = connection.execute(
                "SELECT * FROM runs WHERE board = %s AND task_id = %s ORDER BY id",
                (self.slug, task_id),
            )
            return [run_from_row(row, self.slug) for row in rows]

        return self._db.transaction(work)

    def get_run(self, run_id: int) -> Run:
        return self._db.transaction(lambda c: self._run(c, run_id))

    def unblock(self, task_id: str) -> Task:
        def work(connection: Connection) -> Task:
            task = self._task(connection, task_id, lock=True)
            if task.status is not Status.BLOCKED:
                raise UsageError(f"task {task_id!r} is {task.status}, not blocked")
            statuses = self._statuses(connection, task.parents)
            now = self._clock()
            connection.execute(
                "UPDATE tasks SET status = %s, block_reason = NULL, block_kind = NULL, "
                "failure_count = 0, next_attempt_at = NULL, updated_at = %s "
                "WHERE board = %s AND id = %s",
                (rules.initial_status(statuses).value, now, self.slug, task_id),
            )
            self._event(connection, task_id, EventKind.UNBLOCKED, now)
            return self._task(connection, task_id)

        return self._recording(work, notify=True)

    def archive(self, task_id: str) -> Task:
        def work(connection: Connection) -> Task:
            task = self._task(connection, task_id, lock=True)
            if task.status is Status.RUNNING:
                raise UsageError(
                    f"task {task_id!r} is running (run {task.current_run_id}); stop it first"
                )
            if task.status is Status.ARCHIVED:
                return task
            now = self._clock()
            connection.execute(
                "UPDATE tasks SET status = 'archived', block_kind = NULL, updated_at = %s "
                "WHERE board = %s AND id = %s",
                (now, self.slug, task_id),
            )
            self._event(connection, task_id, EventKind.ARCHIVED, now, previous=task.status.value)
            return self._task(connection, task_id)

        return self._recording(work, notify=True)

    def counts(self) -> dict[str, int]:
        def work(connection: Connection) -> dict[str, int]:
            counted = dict.fromkeys((s.value for s in Status), 0)
            for row in connection.execute(
                "SELECT status, COUNT(*) AS n FROM tasks WHERE board = %s GROUP BY status",
                (self.slug,),
            ):
                counted[row["status"]] = row["n"]
            return counted

        return self._db.transaction(work)

    # -- the run lifecycle -------------------------------------------------------

    def claim(self, node: str, lease_ttl: float, default_assignee: str) -> Claim | None:
        if not lease_ttl > 0:
            raise UsageError(f"lease ttl must be more than 0 seconds, not {lease_ttl:g}")

        def work(connection: Connection) -> Claim | None:
            counter = connection.execute(
                "SELECT next_run_id FROM boards WHERE slug = %s FOR NO KEY UPDATE", (self.slug,)
            ).fetchone()
            if counter is None:
                raise NotFound(f"board {self.slug!r} no longer exists")
            now = self._clock()
            picked = self._pick(connection, now, default_assignee)
            if picked is None:
                return None
            task_id, assignee = picked
            run_id = counter["next_run_id"] + 1
            connection.execute(
                "UPDATE boards SET next_run_id = %s WHERE slug = %s", (run_id, self.slug)
            )
            connection.execute(
                "INSERT INTO runs (board, id, task_id, node, claimed_at, lease_expires_at, "
                "heartbeat_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (self.slug, run_id, task_id, node, now, now + lease_ttl, now),
            )
            connection.execute(
                "UPDATE tasks SET status = 'running', assignee = %s, current_run_id = %s, "
                "updated_at = %s WHERE board = %s AND id = %s",
                (assignee, run_id, now, self.slug, task_id),
            )
            self._event(connection, task_id, EventKind.CLAIMED, now, run_id, node=node)
            return Claim(self._task(connection, task_id), self._run(connection, run_id))

        return self._recording(work, notify=lambda claimed: claimed is not None)

    def _pick(
        self, connection: Connection, now: float, default_assignee: str
    ) -> tuple[str, str] | None:
        """The first claimable task in priority-then-age order, row-locked, and its assignee.

        Whose task it is stays a pure rule (``rules.claim_assignee``); only the chosen
        row is locked, and a row another transition holds is skipped, not waited for.
        """
        candidates = connection.execute(
            "SELECT id, assignee FROM tasks WHERE board = %s AND status = 'ready' "
            "AND (next_attempt_at IS NULL OR next_attempt_at <= %s) "
            "ORDER BY priority DESC, created_at, seq",
            (self.slug, now),
        ).fetchall()
        for row in candidates:
            assignee = rules.claim_assignee(row["assignee"], default_assignee)
            if assignee is None:
                continue
            locked = connection.execute(
                "SELECT 1 FROM tasks WHERE board = %s AND id = %s AND status = 'ready' "
                "FOR UPDATE SKIP LOCKED",
                (self.slug, row["id"]),
            ).fetchone()
            if locked is not None:
                return row["id"], assignee
        return None

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        def work(connection: Connection) -> bool:
            now = self._clock()
            cursor = connection.execute(
                "UPDATE runs SET lease_expires_at = %s, heartbeat_at = %s "
                "WHERE board = %s AND id = %s AND ended_at IS NULL AND EXISTS ("
                "SELECT 1 FROM tasks WHERE tasks.board = runs.board "
                "AND tasks.current_run_id = runs.id AND tasks.status = 'running')",
                (now + lease_ttl, now, self.slug, run_id),
            )
            return cursor.rowcount == 1

        return self._db.transaction(work)

    def complete(self, run_id: int, result: dict[str, Any], summary: str) -> CompleteOutcome:
        def work(connection: Connection) -> CompleteOutcome:
            run = connection.execute(
                "SELECT task_id FROM runs WHERE board = %s AND id = %s", (self.slug, run_id)
            ).fetchone()
            if run is None:
                return CompleteOutcome.STALE
            task = self._task(connection, run["task_id"], lock=True)
            latest = connection.execute(
                "SELECT MAX(id) AS id FROM runs WHERE board = %s AND task_id = %s "
                "AND ended_at IS NOT NULL",
                (self.slug, task.id),
            ).fetchone()
            outcome = rules.completion(
                run_id,
                status=task.status,
                current_run_id=task.current_run_id,
                completed_run_id=task.completed_run_id,
                latest_ended_run_id=latest["id"] if latest is not None else None,
                result_matches=rules.same_result(task.result, result),
            )
            if outcome in (CompleteOutcome.COMPLETED, CompleteOutcome.REPLAYED):
                self._record_completion(connection, task, run_id, result, summary, outcome)
            return outcome

        return self._recording(
            work,
            notify=lambda outcome: outcome in (CompleteOutcome.COMPLETED, CompleteOutcome.REPLAYED),
        )

    def _record_completion(
        self,
        connection: Connection,
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
                "UPDATE runs SET outcome = 'completed' WHERE board = %s AND id = %s",
                (self.slug, run_id),
            )
            kind = EventKind.REPLAYED
        connection.execute(
            "UPDATE tasks SET status = 'done', current_run_id = NULL, completed_run_id = %s, "
            "summary = %s, result = %s, failure_count = 0, next_attempt_at = NULL, "
            "block_reason = NULL, block_kind = NULL, updated_at = %s "
            "WHERE board = %s AND id = %s",
            (
                run_id, summary, rules.canonical_json(result).decode("utf-8"), now,
                self.slug, task.id,
            ),
        )
        self._event(connection, task.id, kind, now, run_id)
        self._promote_children(connection, task.id, now)

    def _promote_children(self, connection: Connection, parent: str, now: float) -> None:
        """Children waiting only on ``parent`` become ready.

        Each child row is locked before its parents are read, so of two completions
        sharing a child the second waits and then sees the first one's ``done``.
        """
        children = connection.execute(
            "SELECT t.id FROM tasks t JOIN task_links l ON l.board = t.board AND l.task_id = t.id "
            "WHERE l.board = %s AND l.parent_id = %s AND t.status = 'todo' "
            "ORDER BY t.id FOR UPDATE OF t",
            (self.slug, parent),
        ).fetchall()
        for child in children:
            statuses = connection.execute(
                "SELECT p.status FROM task_links l JOIN tasks p "
                "ON p.board = l.board AND p.id = l.parent_id "
                "WHERE l.board = %s AND l.task_id = %s",
                (self.slug, child["id"]),
            )
            if rules.initial_status(Status(row["status"]) for row in statuses) is Status.READY:
                connection.execute(
                    "UPDATE tasks SET status = 'ready', updated_at = %s "
                    "WHERE board = %s AND id = %s",
                    (now, self.slug, child["id"]),
                )
                self._event(connection, child["id"], EventKind.PROMOTED, now, parent=parent)

    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool:
        kind = BlockKind(kind)

        def work(connection: Connection) -> bool:
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

        return self._recording(work, notify=bool)

    def _set_blocked(
        self,
        connection: Connection,
        task_id: str,
        reason: str,
        kind: BlockKind,
        failure_count: int,
        now: float,
    ) -> None:
        connection.execute(
            "UPDATE tasks SET status = 'blocked', current_run_id = NULL, block_reason = %s, "
            "block_kind = %s, failure_count = %s, next_attempt_at = NULL, updated_at = %s "
            "WHERE board = %s AND id = %s",
            (reason, kind.value, failure_count, now, self.slug, task_id),
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

        def work(connection: Connection) -> bool:
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
                "UPDATE tasks SET status = 'ready', current_run_id = NULL, failure_count = %s, "
                "next_attempt_at = %s, updated_at = %s WHERE board = %s AND id = %s",
                (
                    failures, None if cooldown is None else now + cooldown, now,
                    self.slug, task["id"],
                ),
            )
            self._event(
                connection, task["id"], EventKind.RECLAIMED, now, run_id,
                reason=reason, outcome=outcome.value, cooldown=cooldown,
            )
            return True

        return self._recording(work, notify=bool)

    def running_runs(self, node: str | None = None) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            query = "SELECT * FROM runs WHERE board = %s AND ended_at IS NULL"
            parameters: tuple[str, ...] = (self.slug,)
            if node is not None:
                query += " AND node = %s"
                parameters += (node,)
            rows = connection.execute(query + " ORDER BY id", parameters)
            return [run_from_row(row, self.slug) for row in rows]

        return self._db.transaction(work)

    def expired_runs(self, now: float | None = None) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            rows = connection.execute(
                "SELECT * FROM runs WHERE board = %s AND ended_at IS NULL "
                "AND lease_expires_at <= %s ORDER BY id",
                (self.slug, self._clock() if now is None else now),
            )
            return [run_from_row(row, self.slug) for row in rows]

        return self._db.transaction(work)

    def close(self) -> None:
        """Nothing to release: connections belong to the store's pool."""


class PostgresStore:
    """Boards as rows of one database; any number of runners may open it at once."""

    def __init__(
        self,
        url: str,
        failure_limit: int = 3,
        clock: Clock = time.time,
        pool_size: int = 4,
    ) -> None:
        self._failure_limit = failure_limit
        self._clock = clock
        self._db = Database(url, pool_size)
        self._listener = Listener(url, self._db)
        self._listener.connect()  # a failure here is retried by wait_for_change
        self._boards: dict[str, PostgresBoard] = {}
        self._known_slugs: list[str] | None = None
        self._lock = threading.Lock()

    def _open(self, slug: str) -> PostgresBoard:
        with self._lock:
            return self._boards.setdefault(
                slug, PostgresBoard(slug, self._db, self._failure_limit, self._clock)
            )

    def create_board(self, slug: str) -> PostgresBoard:
        check_name("board", slug)

        def work(connection: Connection) -> bool:
            row = connection.execute(
                "INSERT INTO boards (slug, created_at) VALUES (%s, %s) "
                "ON CONFLICT (slug) DO NOTHING RETURNING slug",
                (slug, self._clock()),
            ).fetchone()
            return row is not None

        if not self._db.transaction(work, notify=bool):
            raise UsageError(f"board {slug!r} already exists")
        return self._open(slug)

    def board(self, slug: str) -> PostgresBoard:
        check_name("board", slug)
        with self._lock:
            opened = self._boards.get(slug)
        if opened is not None:
            return opened
        exists = self._db.transaction(
            lambda c: c.execute("SELECT 1 FROM boards WHERE slug = %s", (slug,)).fetchone()
        )
        if exists is None:
            raise NotFound(f"no board {slug!r}; create it with 'lane-runner board create {slug}'")
        return self._open(slug)

    def board_slugs(self) -> list[str]:
        """Every board's slug; during an outage, the last list this store saw.

        The daemon and recovery walk boards one by one and handle ``BoardUnavailable``
        per board, so a store-wide outage then looks like every board being down
        rather than stopping the loop. A store that never reached the database has
        no list to fall back on and raises.
        """
        try:
            rows = self._db.transaction(
                lambda c: c.execute("SELECT slug FROM boards").fetchall()
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
