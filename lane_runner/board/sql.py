"""The board's transactions, written once for every SQL backend (docs/ARCHITECTURE.md §5).

``SqlBoard`` implements the contract of ``board/base.py`` on top of a ``Dialect``:
what differs between SQLite and PostgreSQL (placeholders, how a transaction
begins and is retried, how a board is locked and its run ids handed out, how other
runners hear of a change) lives in the dialect; what a transition reads, decides
(through ``board/rules.py``) and writes lives here, once.

Both backends keep the same tables and columns. Every statement names its board
as ``board = :board``: PostgreSQL holds every board in one set of tables, and an
SQLite file holds one board, whose rows all carry the dialect's ``scope`` ('').

Locking, the same promise on both. Two kinds of lock: a task's row lock
(``Dialect.lock_rows``; on PostgreSQL ``FOR NO KEY UPDATE``, on SQLite nothing,
as ``BEGIN IMMEDIATE`` already holds the whole file) and the board's lock
(``Dialect.lock_board``). A transaction that changes tasks takes the row locks of
its own tasks first, decides what it can from those tasks alone, and takes the
board lock before it reads another task's state or writes an event; both are kept
to its commit. So the decisions that need the whole board (a claim's pause check,
promoting children, a new task's parents) see every transition committed before
them; a board lock that is one writer at a time (SQLite's) makes event ids and run
ids follow commit order, and one shared by claims and completions (PostgreSQL's
gate) says where readers must stop (``Dialect.settled_events``); the statements of
a claim's pick and a
completion's own-task checks do not hold the board lock every runner waits on.
A claim picks its task before the board lock: the first claimable task that no
other transaction holds (``SKIP LOCKED``), re-checked under its row lock, so two
claims never get one task, and concurrent claims may commit a little out of
priority order (each took the first task nobody else was claiming). Reads,
heartbeats and comments change no task and take no lock but a run's row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, Protocol, TypeVar

import orjson

from lane_runner import suggest
from lane_runner.board import rules
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.gate import RedactedWrites
from lane_runner.board.model import (
    BlockKind,
    BoardPause,
    Claim,
    Comment,
    CompleteOutcome,
    Event,
    EventKind,
    NewTask,
    Outcome,
    Run,
    Status,
    StopRequest,
    Task,
    TaskEdit,
)
from lane_runner.board.rows import Row, run_from_row, stop_from_row, task_from_row
from lane_runner.errors import NotFound, UsageError

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

    def clock(self) -> tuple[str, float | None]:
        """How a statement compares with the time now: an SQL expression, and the value
        bound to ``:now`` in it (None when the expression needs none)."""

    def now(self, connection: Connection) -> float:
        """The time a transition records, in seconds since the epoch."""

    def close(self) -> None:
        """Release what this board holds of the backend (its own connections, if any)."""


#: The migration step of the operator controls, the same on every backend (portable
#: DDL): a task's own retry limit, an operator's stop request on a run, and a board's
#: pause. Each backend appends it to its own steps.
CONTROLS_STEP: tuple[str, ...] = (
    "ALTER TABLE tasks ADD COLUMN max_retries integer "
    "CHECK (max_retries IS NULL OR max_retries >= 0)",
    "ALTER TABLE runs ADD COLUMN stop_requested_at double precision",
    "ALTER TABLE runs ADD COLUMN stop_reason text",
    "ALTER TABLE runs ADD COLUMN stop_requeue integer",
    """CREATE TABLE board_pauses (
        board text PRIMARY KEY,
        reason text NOT NULL,
        at double precision NOT NULL,
        paused_by text NOT NULL
    )""",
)

#: The board's usage ledger (``SharedLedger``), the same DDL on every backend: the home
#: ledger's records, whole (``data``), keyed by their id, so a record sent twice is
#: stored once; the task and the UTC day are columns for the budgets' reads.
USAGE_STEP: tuple[str, ...] = (
    """CREATE TABLE usage (
        board text NOT NULL,
        id text NOT NULL,
        task_id text NOT NULL,
        day text NOT NULL,
        at double precision NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (board, id)
    )""",
    "CREATE INDEX usage_task ON usage (board, task_id)",
    "CREATE INDEX usage_day ON usage (board, day)",
)


#: The block kinds the first schema allowed; later steps widen the check (never edit a
#: released step, so the first one keeps naming exactly these).
FIRST_BLOCK_KINDS = ("capability", "transient", "needs_input", "gave_up")
#: A task's own budget (issue 30), the same DDL on every backend; each backend also
#: lets ``block_kind`` say ``budget`` in its own way (``BUDGET_KIND``).
BUDGET_COLUMNS: tuple[str, ...] = (
    "ALTER TABLE tasks ADD COLUMN max_cost_usd double precision "
    "CHECK (max_cost_usd IS NULL OR max_cost_usd > 0)",
    "ALTER TABLE tasks ADD COLUMN max_tokens bigint CHECK (max_tokens IS NULL OR max_tokens > 0)",
)
BUDGET_KIND = "budget"
#: A migration statement: SQL, or a function for what static SQL cannot say.
Statement = str | Callable[[Connection], None]


@lru_cache(maxsize=256)
def pyformat(statement: str) -> str:
    """``:name`` placeholders as psycopg's ``%(name)s`` (and a literal ``%`` doubled)."""
    return re.sub(r"(?<![:\w]):([a-z_][a-z0-9_]*)", r"%(\1)s", statement.replace("%", "%%"))


def upgrade(
    connection: Connection, version: int, migrations: Sequence[Sequence[Statement]], where: str
) -> bool:
    """Bring a schema at ``version`` up to date; True when a step ran.

    ``migrations[n]`` brings a schema from version n to n + 1 (append steps, never
    edit a released one). A schema newer than this code knows is refused, not
    guessed at: BoardUnavailable, naming ``where``.
    """
    if version > len(migrations):
        raise BoardUnavailable(
            f"{where} has schema version {version}, newer than this lane-runner knows "
            f"({len(migrations)}); upgrade lane-runner"
        )
    for step in migrations[version:]:
        for statement in step:
            if callable(statement):
                statement(connection)
            else:
                connection.execute(statement)
    return version < len(migrations)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


def _changed(value: object) -> bool:
    return bool(value)


def _always(_: object) -> bool:
    return True


class SqlBoard(RedactedWrites):
    """One board on an SQL backend. Methods are safe to call from several threads."""

    def __init__(self, slug: str, dialect: Dialect, failure_limit: int) -> None:
        self.slug = slug
        self._dialect = dialect
        self._failure_limit = failure_limit

    # -- plumbing ----------------------------------------------------------------

    def _q(self, connection: Connection, statement: str, **params: Any) -> Cursor:
        cursor: Cursor = connection.execute(
            self._dialect.sql(statement), {"board": self._dialect.scope, **params}
        )
        return cursor

    def _read(self, work: Work[T]) -> T:
        return self._dialect.transaction(work, write=False)

    def _write(self, work: Work[T]) -> T:
        """A write that changes no task (heartbeat, comment): no board lock, no notification."""
        return self._dialect.transaction(work, write=True)

    def _transition(
        self, work: Work[T], notify: Callable[[T], bool] = _always
    ) -> T:
        """A write that may change tasks; ``work`` takes its locks itself, in this order:
        its own tasks' rows (``_task_row(lock=True)``, ``_current``), then the board
        (``_lock``) before it reads another task's state or writes an event."""
        return self._dialect.transaction(work, write=True, notify=notify)

    def _lock(self, connection: Connection, *, new_run: bool = False) -> BoardLock:
        """The board lock, to the commit: the transition's time (and a claim's run id)."""
        return self._dialect.lock_board(connection, new_run=new_run)

    # -- row access --------------------------------------------------------------

    def _parents(self, connection: Connection, task_id: str) -> tuple[str, ...]:
        rows = self._q(
            connection,
            "SELECT parent_id FROM task_links WHERE board = :board AND task_id = :id "
            "ORDER BY position",
            id=task_id,
        )
        return tuple(row["parent_id"] for row in rows)

    def _task_row(self, connection: Connection, task_id: str, *, lock: bool = False) -> Row | None:
        """The task's row; with ``lock``, its row lock held to the commit."""
        row: Row | None = self._q(
            connection,
            "SELECT * FROM tasks WHERE board = :board AND id = :id"
            + (self._dialect.lock_rows() if lock else ""),
            id=task_id,
        ).fetchone()
        return row

    def _task(self, connection: Connection, task_id: str, *, lock: bool = False) -> Task:
        row = self._task_row(connection, task_id, lock=lock)
        if row is None:
            listed = self._q(connection, "SELECT id FROM tasks WHERE board = :board")
            ids = [found["id"] for found in listed]  # for "did you mean"
            raise NotFound(
                f"no task {task_id!r} on board {self.slug!r}{suggest.hint(task_id, ids)}; "
                f"see 'lane-runner task ls --board {self.slug}'"
            )
        return task_from_row(row, self.slug, self._parents(connection, task_id))

    def _run(self, connection: Connection, run_id: int) -> Run:
        row = self._q(
            connection, "SELECT * FROM runs WHERE board = :board AND id = :id", id=run_id
        ).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id} on board {self.slug!r}")
        return run_from_row(row, self.slug)

    def _current(self, connection: Connection, run_id: int) -> Row | None:
        """The task row whose current run is ``run_id`` (still running), row-locked: the
        exact-run guard, re-checked on the latest version once the lock is granted."""
        row: Row | None = self._q(
            connection,
            "SELECT * FROM tasks WHERE board = :board AND current_run_id = :run "
            "AND status = 'running'" + self._dialect.lock_rows(),
            run=run_id,
        ).fetchone()
        return row

    def _parent_statuses(self, connection: Connection, parents: Sequence[str]) -> list[Status]:
        """The parents' statuses; UsageError for a missing or archived one (nothing written).

        Every parent is looked up before any is judged, so the error names the first
        parent that does not exist, whatever the order of the problems.
        """
        rows = [self._task_row(connection, parent) for parent in parents]
        found: list[Row] = []
        for parent, row in zip(parents, rows, strict=True):
            if row is None:
                raise UsageError(
                    f"no parent task {parent!r} on board {self.slug!r}: "
                    "parents must be tasks on the same board"
                )
            found.append(row)
        statuses = [Status(row["status"]) for row in found]
        for parent, status in zip(parents, statuses, strict=True):
            if status is Status.ARCHIVED:
                raise UsageError(
                    f"parent task {parent!r} is archived; a child of it would never run"
                )
        return statuses

    def _event(
        self,
        connection: Connection,
        task_id: str,
        kind: EventKind,
        at: float,
        run_id: int | None = None,
        **data: Any,
    ) -> None:
        self._q(
            connection,
            "INSERT INTO events (board, task_id, kind, run_id, at, data) "
            "VALUES (:board, :task, :kind, :run, :at, :data)",
            task=task_id, kind=kind.value, run=run_id, at=at, data=_json(data),
        )

    def _end_run(
        self, connection: Connection, run_id: int, outcome: Outcome, reason: str | None, at: float
    ) -> None:
        self._q(
            connection,
            "UPDATE runs SET ended_at = :at, outcome = :outcome, reason = :reason "
            "WHERE board = :board AND id = :id AND ended_at IS NULL",
            at=at, outcome=outcome.value, reason=reason, id=run_id,
        )

    # -- tasks -------------------------------------------------------------------

    def add_task(self, new: NewTask) -> Task:
        new = rules.checked_task(new)

        def work(connection: Connection) -> Task:
            now = self._lock(connection).now  # first: the parents' statuses are read under it
            task_id = new.id or self._fresh_id(connection)
            if self._task_row(connection, task_id) is not None:
                raise UsageError(f"task {task_id!r} already exists on board {self.slug!r}")
            if rules.would_cycle(task_id, new.parents, lambda t: self._parents(connection, t)):
                raise UsageError(f"task {task_id!r} cannot be its own ancestor (parent cycle)")
            statuses = self._parent_statuses(connection, new.parents)
            self._q(
                connection,
                "INSERT INTO tasks (board, id, title, body, status, assignee, priority, "
                "workspace, max_runtime, goal_turns, max_retries, max_cost_usd, max_tokens, "
                "created_at, updated_at) "
                "VALUES (:board, :id, :title, :body, :status, :assignee, :priority, :workspace, "
                ":max_runtime, :goal_turns, :max_retries, :max_cost_usd, :max_tokens, :now, :now)",
                id=task_id, title=new.title, body=new.body,
                status=rules.initial_status(statuses).value, assignee=new.assignee,
                priority=new.priority, workspace=new.workspace, max_runtime=new.max_runtime,
                goal_turns=new.goal_turns, max_retries=new.max_retries,
                max_cost_usd=new.max_cost_usd, max_tokens=new.max_tokens, now=now,
            )
            for position, parent in enumerate(new.parents):
                self._q(
                    connection,
                    "INSERT INTO task_links (board, task_id, parent_id, position) "
                    "VALUES (:board, :id, :parent, :position)",
                    id=task_id, parent=parent, position=position,
                )
            self._event(connection, task_id, EventKind.CREATED, now, title=new.title)
            return self._task(connection, task_id)

        return self._transition(work)

    def _fresh_id(self, connection: Connection) -> str:
        while True:
            candidate = rules.new_task_id()
            if self._task_row(connection, candidate) is None:
                return candidate

    def get_task(self, task_id: str) -> Task:
        return self._read(lambda connection: self._task(connection, task_id))

    def list_tasks(self, status: Status | None = None) -> list[Task]:
        def work(connection: Connection) -> list[Task]:
            links: dict[str, list[str]] = {}
            for row in self._q(
                connection,
                "SELECT task_id, parent_id FROM task_links WHERE board = :board "
                "ORDER BY task_id, position",
            ):
                links.setdefault(row["task_id"], []).append(row["parent_id"])
            only = "" if status is None else " AND status = :status"
            rows = self._q(
                connection,
                f"SELECT * FROM tasks WHERE board = :board{only} "
                f"ORDER BY created_at, {self._dialect.insertion_order}",
                status=None if status is None else Status(status).value,
            )
            return [task_from_row(row, self.slug, tuple(links.get(row["id"], ()))) for row in rows]

        return self._read(work)

    def comment(self, task_id: str, body: str, author: str = "operator") -> Comment:
        rules.check_comment(body)

        def work(connection: Connection) -> Comment:
            self._task(connection, task_id)
            now = self._dialect.now(connection)
            row = self._q(
                connection,
                "INSERT INTO comments (board, task_id, author, body, at) "
                "VALUES (:board, :task, :author, :body, :at) RETURNING id",
                task=task_id, author=author, body=body, at=now,
            ).fetchone()
            return Comment(row["id"], self.slug, task_id, author, body, now)

        return self._write(work)

    def comments(self, task_id: str, limit: int | None = None) -> list[Comment]:
        def work(connection: Connection) -> list[Comment]:
            self._task(connection, task_id)
            latest = "" if limit is None else " LIMIT :limit"
            rows = self._q(
                connection,
                "SELECT * FROM (SELECT * FROM comments WHERE board = :board AND task_id = :task "
                f"ORDER BY id DESC{latest}) latest ORDER BY id",
                task=task_id, limit=limit,
            )
            return [
                Comment(r["id"], self.slug, r["task_id"], r["author"], r["body"], r["at"])
                for r in rows
            ]

        return self._read(work)

    def events(self, task_id: str | None = None, after_id: int = 0) -> list[Event]:
        # One task's events are each written under its row lock, one transaction at a
        # time, so they commit in id order: only a read across tasks needs the horizon.
        settled = self._dialect.settled_events() if task_id is None else None

        def work(connection: Connection) -> list[Event]:
            if task_id is not None:
                self._task(connection, task_id)
            one = "" if task_id is None else " AND task_id = :task"
            upto = "" if settled is None else " AND id <= :settled"
            rows = self._q(
                connection,
                f"SELECT * FROM events WHERE board = :board{one} AND id > :after{upto} "
                "ORDER BY id",
                task=task_id, after=after_id, settled=settled,
            )
            return [
                Event(
                    r["id"], self.slug, r["task_id"], r["kind"], r["run_id"], r["at"],
                    orjson.loads(r["data"]),
                )
                for r in rows
            ]

        return self._read(work)

    def runs(self, task_id: str) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            self._task(connection, task_id)
            rows = self._q(
                connection,
                "SELECT * FROM runs WHERE board = :board AND task_id = :task ORDER BY id",
                task=task_id,
            )
            return [run_from_row(row, self.slug) for row in rows]

        return self._read(work)

    def get_run(self, run_id: int) -> Run:
        return self._read(lambda connection: self._run(connection, run_id))

    def unblock(self, task_id: str) -> Task:
        def work(connection: Connection) -> Task:
            return self._reopen(connection, task_id, EventKind.UNBLOCKED)

        return self._transition(work)

    def retry(self, task_id: str, comment: str, author: str = "operator") -> Task:
        """``unblock`` with the operator's word on it: the comment the next run reads."""
        rules.check_comment(comment)

        def work(connection: Connection) -> Task:
            task = self._reopen(connection, task_id, EventKind.RETRIED, "retry")
            self._q(
                connection,
                "INSERT INTO comments (board, task_id, author, body, at) "
                "VALUES (:board, :task, :author, :body, :at)",
                task=task_id, author=author, body=comment, at=task.updated_at,
            )
            return task

        return self._transition(work)

    def _reopen(
        self, connection: Connection, task_id: str, kind: EventKind, verb: str = "unblock"
    ) -> Task:
        """A blocked task back to ready (todo while a parent is not done), block and failure
        count cleared; appends ``kind``. UsageError when it is not blocked or a parent is
        archived (it would wait forever)."""
        task = self._task(connection, task_id, lock=True)
        if task.status is not Status.BLOCKED:
            raise UsageError(f"task {task_id!r} is {task.status}, not blocked: nothing to {verb}")
        now = self._lock(connection).now  # before reading the parents' statuses
        statuses = self._parent_statuses(connection, task.parents)
        self._q(
            connection,
            "UPDATE tasks SET status = :status, block_reason = NULL, block_kind = NULL, "
            "failure_count = 0, next_attempt_at = NULL, updated_at = :now "
            "WHERE board = :board AND id = :id",
            status=rules.initial_status(statuses).value, now=now, id=task_id,
        )
        self._event(connection, task_id, kind, now)
        return self._task(connection, task_id)

    def edit(self, task_id: str, edit: TaskEdit) -> Task:
        edit = rules.checked_edit(edit)

        def work(connection: Connection) -> Task:
            task = self._task(connection, task_id, lock=True)
            if task.status is Status.RUNNING:
                raise UsageError(
                    f"task {task_id!r} is running (run {task.current_run_id}): stop it first "
                    f"('lane-runner task stop {task_id}'), then edit it"
                )
            changes = rules.edit_changes(task, edit)
            if not changes:
                return task
            now = self._lock(connection).now
            columns = ", ".join(f"{name} = :{name}" for name in changes)  # rules.EDITABLE only
            self._q(
                connection,
                f"UPDATE tasks SET {columns}, updated_at = :now WHERE board = :board AND id = :id",
                now=now, id=task_id, **changes,
            )
            self._event(connection, task_id, EventKind.EDITED, now, fields=sorted(changes))
            return self._task(connection, task_id)

        return self._transition(work)

    def archive(self, task_id: str) -> Task:
        def work(connection: Connection) -> Task:
            task = self._task(connection, task_id, lock=True)
            if task.status is Status.RUNNING:
                raise UsageError(
                    f"task {task_id!r} is running (run {task.current_run_id}); stop it first"
                )
            if task.status is Status.ARCHIVED:
                return task
            now = self._lock(connection).now
            self._q(
                connection,
                "UPDATE tasks SET status = 'archived', block_kind = NULL, updated_at = :now "
                "WHERE board = :board AND id = :id",
                now=now, id=task_id,
            )
            self._event(connection, task_id, EventKind.ARCHIVED, now, previous=task.status.value)
            return self._task(connection, task_id)

        return self._transition(work)

    def delete(self, task_id: str, *, force: bool = False) -> Task:
        def work(connection: Connection) -> Task:
            task = self._task(connection, task_id, lock=True)
            self._refuse_running([task])
            now = self._lock(connection).now  # before reading the children's statuses
            waiting = [
                row["task_id"]
                for row in self._q(
                    connection,
                    "SELECT l.task_id FROM task_links l JOIN tasks c ON c.board = l.board "
                    "AND c.id = l.task_id WHERE l.board = :board AND l.parent_id = :id "
                    "AND c.status NOT IN ('done', 'archived') ORDER BY l.task_id",
                    id=task_id,
                )
            ]
            if waiting:
                raise UsageError(
                    f"task {task_id!r} is a parent of {', '.join(waiting)}, waiting on it: "
                    "archive or delete those first"
                )
            self._archive_for_deletion([task], force, now, connection)
            for statement in (
                "DELETE FROM events WHERE board = :board AND task_id = :id",
                "DELETE FROM comments WHERE board = :board AND task_id = :id",
                "DELETE FROM runs WHERE board = :board AND task_id = :id",
                "DELETE FROM task_links WHERE board = :board "
                "AND (task_id = :id OR parent_id = :id)",
                "DELETE FROM tasks WHERE board = :board AND id = :id",
            ):
                self._q(connection, statement, id=task_id)
            return task

        return self._transition(work)

    def clear(self, *, force: bool = False, also: Sequence[str] = ()) -> int:
        """Delete every task of the board with its runs, events and comments, and its pause,
        then run the backend's ``also`` statements (``:board`` bound), in one transaction:
        what ``Store.delete_board`` does before it removes the board itself. Refused while a
        task runs; unless ``force``, while a task is not archived. Returns the tasks deleted.
        """

        def work(connection: Connection) -> int:
            now = self._lock(connection).now
            tasks = [
                task_from_row(row, self.slug, ())
                for row in self._q(connection, "SELECT * FROM tasks WHERE board = :board")
            ]
            self._refuse_running(tasks)
            self._archive_for_deletion(tasks, force, now, connection)
            for table in (
                "events", "comments", "runs", "task_links", "tasks", "board_pauses", "usage"
            ):
                self._q(connection, f"DELETE FROM {table} WHERE board = :board")
            for statement in also:
                self._q(connection, statement)
            return len(tasks)

        return self._transition(work)

    def _refuse_running(self, tasks: Sequence[Task]) -> None:
        running = [task.id for task in tasks if task.status is Status.RUNNING]
        if running:
            raise UsageError(
                f"{', '.join(running)} {'is' if len(running) == 1 else 'are'} running on board "
                f"{self.slug!r}: stop {'it' if len(running) == 1 else 'them'} first "
                "('lane-runner task stop ID --wait'), then delete"
            )

    def _archive_for_deletion(
        self, tasks: Sequence[Task], force: bool, now: float, connection: Connection
    ) -> None:
        """Only archived tasks are deleted (their events may go then, not before); ``force``
        archives the others first, in the same transaction."""
        live = [task.id for task in tasks if task.status is not Status.ARCHIVED]
        if not live:
            return
        if not force:
            shown = ", ".join(live[:5]) + (f" and {len(live) - 5} more" if len(live) > 5 else "")
            raise UsageError(
                f"only archived tasks are deleted, and {shown} "
                f"{'is' if len(live) == 1 else 'are'} not: archive first "
                "('lane-runner task archive ID'), or pass --force to archive, then delete"
            )
        for task_id in live:
            self._q(
                connection,
                "UPDATE tasks SET status = 'archived', block_kind = NULL, updated_at = :now "
                "WHERE board = :board AND id = :id",
                now=now, id=task_id,
            )

    def counts(self) -> dict[str, int]:
        def work(connection: Connection) -> dict[str, int]:
            counted = dict.fromkeys((s.value for s in Status), 0)
            for row in self._q(
                connection,
                "SELECT status, COUNT(*) AS n FROM tasks WHERE board = :board GROUP BY status",
            ):
                counted[row["status"]] = row["n"]
            return counted

        return self._read(work)

    # -- the run lifecycle -------------------------------------------------------

    def claim(
        self,
        node: str,
        lease_ttl: float,
        default_assignee: str,
        skip_workspaces: Collection[str] = (),
    ) -> Claim | None:
        if not lease_ttl > 0:
            raise UsageError(f"lease ttl must be more than 0 seconds, not {lease_ttl:g}")

        def work(connection: Connection) -> Claim | None:
            # Its row lock, then the board's.
            picked = self._pick(connection, default_assignee, sorted(skip_workspaces))
            if picked is None:
                return None
            task_id, assignee = picked
            now, run_id = self._lock(connection, new_run=True)
            # The pause is checked by the insert, a statement begun under the board lock:
            # no claim commits after a pause did. Paused, nothing is written (the run id
            # taken is skipped, which keeps run ids increasing).
            run = self._q(
                connection,
                "INSERT INTO runs (board, id, task_id, node, claimed_at, lease_expires_at, "
                "heartbeat_at) SELECT :board, :id, :task, :node, :now, :expires, :now "
                "WHERE NOT EXISTS (SELECT 1 FROM board_pauses WHERE board = :board) "
                "RETURNING *",
                id=run_id, task=task_id, node=node, now=now, expires=now + lease_ttl,
            ).fetchone()
            if run is None:
                return None
            task = self._q(
                connection,
                "UPDATE tasks SET status = 'running', assignee = :assignee, "
                "current_run_id = :run, updated_at = :now WHERE board = :board AND id = :id "
                "RETURNING *",
                assignee=assignee, run=run_id, now=now, id=task_id,
            ).fetchone()
            self._event(connection, task_id, EventKind.CLAIMED, now, run_id, node=node)
            parents = self._parents(connection, task_id)
            return Claim(task_from_row(task, self.slug, parents), run_from_row(run, self.slug))

        return self._transition(work, notify=_changed)

    def _pick(
        self, connection: Connection, default_assignee: str, skip_workspaces: Sequence[str]
    ) -> tuple[str, str] | None:
        """The first claimable task in priority-then-age order, row-locked, and its assignee.

        Tasks another transaction holds are skipped (one being claimed now), and the
        conditions are checked again on the latest version once the lock is granted
        (PostgreSQL's READ COMMITTED does), so a task claimed meanwhile is passed over.
        Unassigned tasks are left out in SQL when there is no default assignee, and so
        are tasks of ``skip_workspaces``; a task whose assignee is not a lane
        (``rules.claim_assignee``; ``add_task`` lets none in) is passed over too.
        """
        clock, now = self._dialect.clock()
        skipped = {f"skip{n}": workspace for n, workspace in enumerate(skip_workspaces)}
        not_skipped = (
            f" AND (workspace IS NULL OR workspace NOT IN ({', '.join(':' + k for k in skipped)}))"
            if skipped
            else ""
        )
        passed: dict[str, str] = {}
        while True:
            not_passed = "".join(f" AND id <> :passed{n}" for n in range(len(passed)))
            row = self._q(
                connection,
                "SELECT id, assignee FROM tasks WHERE board = :board AND status = 'ready' "
                f"AND (next_attempt_at IS NULL OR next_attempt_at <= {clock}) "
                f"AND (assignee IS NOT NULL OR :unassigned){not_skipped}{not_passed} "
                f"ORDER BY priority DESC, created_at, {self._dialect.insertion_order} LIMIT 1"
                + self._dialect.lock_rows(skip_locked=True),
                now=now, unassigned=bool(default_assignee), **skipped, **passed,
            ).fetchone()
            if row is None:
                return None
            assignee = rules.claim_assignee(row["assignee"], default_assignee)
            if assignee is not None:
                return row["id"], assignee
            passed[f"passed{len(passed)}"] = row["id"]

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        def work(connection: Connection) -> bool:
            now = self._dialect.now(connection)
            cursor = self._q(
                connection,
                "UPDATE runs SET lease_expires_at = :expires, heartbeat_at = :now "
                "WHERE board = :board AND id = :id AND ended_at IS NULL AND EXISTS ("
                "SELECT 1 FROM tasks WHERE tasks.board = runs.board "
                "AND tasks.current_run_id = runs.id AND tasks.status = 'running')",
                expires=now + lease_ttl, now=now, id=run_id,
            )
            return cursor.rowcount == 1

        return self._write(work)

    def complete(
        self,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        metadata: dict[str, Any] | None = None,
    ) -> CompleteOutcome:
        def work(connection: Connection) -> CompleteOutcome:
            # The run's task, row-locked; then its latest ended run, read by a statement
            # begun once the row lock is held, so it sees every transition of this task
            # (they all hold its row lock). No other task's state is read yet.
            row: Row | None = self._q(
                connection,
                "SELECT * FROM tasks WHERE board = :board AND id = ("
                "SELECT task_id FROM runs WHERE board = :board AND id = :run)"
                + self._dialect.lock_rows(),
                run=run_id,
            ).fetchone()
            if row is None:
                return CompleteOutcome.STALE  # no such run
            latest_ended: int | None = self._q(
                connection,
                "SELECT MAX(id) AS id FROM runs WHERE board = :board AND task_id = :task "
                "AND ended_at IS NOT NULL",
                task=row["id"],
            ).fetchone()["id"]
            task = task_from_row(row, self.slug, ())
            outcome = rules.completion(
                run_id,
                status=task.status,
                current_run_id=task.current_run_id,
                completed_run_id=task.completed_run_id,
                latest_ended_run_id=latest_ended,
                result_matches=rules.same_result(task.result, result),
            )
            if outcome in (CompleteOutcome.COMPLETED, CompleteOutcome.REPLAYED):
                self._record_completion(
                    connection, task.id, run_id, result, summary, outcome, metadata or {}
                )
            return outcome

        return self._transition(
            work,
            notify=lambda outcome: outcome in (CompleteOutcome.COMPLETED, CompleteOutcome.REPLAYED),
        )

    def _record_completion(
        self,
        connection: Connection,
        task_id: str,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        outcome: CompleteOutcome,
        metadata: dict[str, Any],
    ) -> None:
        """The completion's writes, under the board lock (taken here): an event follows,
        and promoting the children reads their other parents."""
        now = self._lock(connection).now
        if outcome is CompleteOutcome.COMPLETED:
            self._end_run(connection, run_id, Outcome.COMPLETED, None, now)
            kind = EventKind.COMPLETED
        else:
            self._q(
                connection,
                "UPDATE runs SET outcome = 'completed' WHERE board = :board AND id = :id",
                id=run_id,
            )
            kind = EventKind.REPLAYED
        self._q(
            connection,
            "UPDATE tasks SET status = 'done', current_run_id = NULL, completed_run_id = :run, "
            "summary = :summary, result = :result, failure_count = 0, next_attempt_at = NULL, "
            "block_reason = NULL, block_kind = NULL, updated_at = :now "
            "WHERE board = :board AND id = :id",
            run=run_id, summary=summary, result=rules.canonical_json(result).decode("utf-8"),
            now=now, id=task_id,
        )
        extra = {"metadata": rules.storable(metadata)} if metadata else {}
        self._event(connection, task_id, kind, now, run_id, **extra)
        self._promote_children(connection, task_id, now)

    def _promote_children(self, connection: Connection, parent: str, now: float) -> None:
        """Children waiting only on ``parent`` become ready, in task id order.

        Under the board lock: a sibling parent completing at the same moment either
        committed before this statement began (its ``done`` is read here) or waits for
        the board lock and then reads this completion's.
        """
        statuses: dict[str, list[Status]] = {}
        for row in self._q(
            connection,
            "SELECT l.task_id AS child, p.status FROM task_links l JOIN tasks p "
            "ON p.board = l.board AND p.id = l.parent_id WHERE l.board = :board "
            "AND l.task_id IN (SELECT t.id FROM tasks t JOIN task_links c ON c.board = t.board "
            "AND c.task_id = t.id WHERE c.board = :board AND c.parent_id = :parent "
            "AND t.status = 'todo') ORDER BY l.task_id",
            parent=parent,
        ):
            statuses.setdefault(row["child"], []).append(Status(row["status"]))
        for child, parents in statuses.items():
            if rules.initial_status(parents) is Status.READY:
                self._q(
                    connection,
                    "UPDATE tasks SET status = 'ready', updated_at = :now "
                    "WHERE board = :board AND id = :id",
                    now=now, id=child,
                )
                self._event(connection, child, EventKind.PROMOTED, now, parent=parent)

    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool:
        kind = BlockKind(kind)

        def work(connection: Connection) -> bool:
            task = self._current(connection, run_id)
            if task is None:
                return False
            now = self._lock(connection).now
            self._end_run(connection, run_id, Outcome.BLOCKED, reason, now)
            failures = task["failure_count"] + count_failure
            self._set_blocked(connection, task["id"], reason, kind, failures, now)
            self._event(
                connection, task["id"], EventKind.BLOCKED, now, run_id,
                reason=reason, block_kind=kind.value,
            )
            return True

        return self._transition(work, notify=_changed)

    def _set_blocked(
        self,
        connection: Connection,
        task_id: str,
        reason: str,
        kind: BlockKind,
        failure_count: int,
        now: float,
    ) -> None:
        self._q(
            connection,
            "UPDATE tasks SET status = 'blocked', current_run_id = NULL, block_reason = :reason, "
            "block_kind = :kind, failure_count = :failures, next_attempt_at = NULL, "
            "updated_at = :now WHERE board = :board AND id = :id",
            reason=reason, kind=kind.value, failures=failure_count, now=now, id=task_id,
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
            task = self._current(connection, run_id)
            if task is None:
                return False
            now = self._lock(connection).now
            self._end_run(connection, run_id, outcome, reason, now)
            failures = task["failure_count"] + count_failure
            limit = rules.failure_limit_of(task["max_retries"], self._failure_limit)
            if count_failure and rules.gives_up(failures, limit):
                because = f"gave up after {failures} failures; last: {reason}"
                self._set_blocked(connection, task["id"], because, BlockKind.GAVE_UP, failures, now)
                self._event(
                    connection, task["id"], EventKind.GAVE_UP, now, run_id,
                    reason=reason, outcome=outcome.value, failures=failures,
                )
                return True
            self._q(
                connection,
                "UPDATE tasks SET status = 'ready', current_run_id = NULL, "
                "failure_count = :failures, next_attempt_at = :retry_at, updated_at = :now "
                "WHERE board = :board AND id = :id",
                failures=failures, retry_at=None if cooldown is None else now + cooldown,
                now=now, id=task["id"],
            )
            self._event(
                connection, task["id"], EventKind.RECLAIMED, now, run_id,
                reason=reason, outcome=outcome.value, cooldown=cooldown,
            )
            return True

        return self._transition(work, notify=_changed)

    # -- operator controls -------------------------------------------------------

    def request_stop(self, task_id: str, reason: str, *, requeue: bool) -> Run:
        """Ask the runner of the task's current run to end it (docs/ARCHITECTURE.md §5).

        Only recorded here: the owning runner sees it at its next heartbeat, kills the
        process tree and ends the run with ``reason`` (blocked, or ready with
        ``requeue``), never as a counted failure. A newer request replaces an older one.
        """
        rules.check_text("stop reason", reason)

        def work(connection: Connection) -> Run:
            task = self._task(connection, task_id, lock=True)
            if task.status is not Status.RUNNING or task.current_run_id is None:
                raise UsageError(f"task {task_id!r} is {task.status}, not running: nothing to stop")
            now = self._lock(connection).now
            run = self._q(
                connection,
                "UPDATE runs SET stop_requested_at = :now, stop_reason = :reason, "
                "stop_requeue = :requeue WHERE board = :board AND id = :id RETURNING *",
                now=now, reason=reason, requeue=int(requeue), id=task.current_run_id,
            ).fetchone()
            self._event(
                connection, task_id, EventKind.STOP_REQUESTED, now, task.current_run_id,
                reason=reason, requeue=requeue,
            )
            return run_from_row(run, self.slug)

        return self._transition(work)

    def stop_request(self, run_id: int) -> StopRequest | None:
        """The stop asked for ``run_id`` while it is still running, if any (read at heartbeats)."""

        def work(connection: Connection) -> StopRequest | None:
            row = self._q(
                connection,
                "SELECT * FROM runs WHERE board = :board AND id = :id AND ended_at IS NULL",
                id=run_id,
            ).fetchone()
            return None if row is None else stop_from_row(row)

        return self._read(work)

    def _pause(self, connection: Connection) -> BoardPause | None:
        row = self._q(connection, "SELECT * FROM board_pauses WHERE board = :board").fetchone()
        return None if row is None else BoardPause(row["reason"], row["at"], row["paused_by"])

    def pause(self, reason: str, by: str) -> BoardPause:
        """No runner claims from this board until ``resume``; running work goes on."""
        rules.check_text("pause reason", reason)

        def work(connection: Connection) -> BoardPause:
            now = self._lock(connection).now
            self._q(connection, "DELETE FROM board_pauses WHERE board = :board")
            self._q(
                connection,
                "INSERT INTO board_pauses (board, reason, at, paused_by) "
                "VALUES (:board, :reason, :now, :by)",
                reason=reason, now=now, by=by,
            )
            return BoardPause(reason, now, by)

        return self._transition(work)

    def resume(self) -> bool:
        """True when a pause was lifted; the runners are told, and claim at once."""

        def work(connection: Connection) -> bool:
            self._lock(connection)
            cursor = self._q(connection, "DELETE FROM board_pauses WHERE board = :board")
            return cursor.rowcount > 0

        return self._transition(work, notify=_changed)

    def paused(self) -> BoardPause | None:
        return self._read(self._pause)

    def running_runs(self, node: str | None = None) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            mine = "" if node is None else " AND node = :node"
            rows = self._q(
                connection,
                f"SELECT * FROM runs WHERE board = :board AND ended_at IS NULL{mine} ORDER BY id",
                node=node,
            )
            return [run_from_row(row, self.slug) for row in rows]

        return self._read(work)

    def expired_runs(self, now: float | None = None) -> list[Run]:
        def work(connection: Connection) -> list[Run]:
            rows = self._q(
                connection,
                "SELECT * FROM runs WHERE board = :board AND ended_at IS NULL "
                "AND lease_expires_at <= :now ORDER BY id",
                now=self._dialect.now(connection) if now is None else now,
            )
            return [run_from_row(row, self.slug) for row in rows]

        return self._read(work)

    # -- the shared usage ledger (``board/base.py`` ``SharedLedger``) ----------------

    def record_usage(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Store the records whose ids are new; no task changes, so no lock, no event."""

        def work(connection: Connection) -> int:
            added = 0
            for record in records:
                cursor = self._q(
                    connection,
                    "INSERT INTO usage (board, id, task_id, day, at, data) "
                    "VALUES (:board, :id, :task_id, :day, :at, :data) "
                    "ON CONFLICT (board, id) DO NOTHING",
                    id=record["id"], task_id=record["task_id"], day=record["day"],
                    at=record["at"], data=_json(record),
                )
                added += cursor.rowcount
            return added

        return self._write(work) if records else 0

    def usage(
        self, *, task_id: str | None = None, since_day: str | None = None
    ) -> list[dict[str, Any]]:
        def work(connection: Connection) -> list[dict[str, Any]]:
            task = "" if task_id is None else " AND task_id = :task_id"
            since = "" if since_day is None else " AND day >= :since_day"
            rows = self._q(
                connection,
                f"SELECT data FROM usage WHERE board = :board{task}{since} ORDER BY at, id",
                task_id=task_id, since_day=since_day,
            )
            return [orjson.loads(row["data"]) for row in rows]

        return self._read(work)

    def close(self) -> None:
        self._dialect.close()

