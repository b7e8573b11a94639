"""The schema steps every SQL backend shares, and the migration runner.

Each backend keeps its own list of steps (``board/sqlite.py``, ``board/postgres/schema.py``)
and appends these portable ones to it; ``upgrade`` brings a schema up to date.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lane_runner.board.base import BoardUnavailable
from lane_runner.board.sql.dialect import Connection

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


#: The board's notification outbox (``Outbox``, docs/notifications.md), the same DDL on
#: every backend: one row per notification, keyed by its stable id, with its lease
#: (``claimed_by`` until ``claimed_until``) and its fate; and the cursor over the
#: board's events that the entries were derived up to.
OUTBOX_STEP: tuple[str, ...] = (
    """CREATE TABLE outbox (
        board text NOT NULL,
        id text NOT NULL,
        kind text NOT NULL,
        task_id text,
        at double precision NOT NULL,
        data text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'sent', 'dropped')),
        attempts integer NOT NULL,
        next_at double precision NOT NULL,
        claimed_by text,
        claimed_until double precision,
        sent_at double precision,
        error text,
        PRIMARY KEY (board, id)
    )""",
    "CREATE INDEX outbox_due ON outbox (board, state, next_at)",
    """CREATE TABLE outbox_cursors (
        board text PRIMARY KEY,
        event_id bigint NOT NULL
    )""",
)


#: The approval gate (docs/approvals.md), the same DDL on every backend: a person's word
#: on a task as it stands (approved or denied, by whom, when), and the second factor's
#: codes used on the board, each at most once (a replayed code is refused by the key,
#: whichever runner checks it).
APPROVAL_STEP: tuple[str, ...] = (
    "ALTER TABLE tasks ADD COLUMN decision text CHECK (decision IN ('approved', 'denied'))",
    "ALTER TABLE tasks ADD COLUMN decided_by text",
    "ALTER TABLE tasks ADD COLUMN decided_at double precision",
    """CREATE TABLE approval_codes (
        board text NOT NULL,
        step bigint NOT NULL,
        at double precision NOT NULL,
        used_by text NOT NULL,
        PRIMARY KEY (board, step)
    )""",
)


#: The task statuses the first schema allowed (``Status`` less ``review``, which only a
#: hosted board, Hermes, has): a released step is never edited, so it keeps these.
FIRST_STATUSES = ("todo", "ready", "running", "done", "blocked", "archived")
#: The run outcomes the first schema allowed (``Outcome`` less ``reviewed``, which the
#: review runs' step adds).
FIRST_OUTCOMES = ("completed", "blocked", "reclaimed", "expired", "timed_out", "failed")
#: A reviewer's run of its own (issue 41, ``ReviewRuns``), the same DDL on every backend:
#: a run's role and, for a review run, the implementer's run it reviews; each backend also
#: lets ``outcome`` say ``reviewed`` in its own way.
REVIEW_RUN_COLUMNS: tuple[str, ...] = (
    "ALTER TABLE runs ADD COLUMN role text NOT NULL DEFAULT 'implement' "
    "CHECK (role IN ('implement', 'review'))",
    "ALTER TABLE runs ADD COLUMN for_run bigint",
)
REVIEWED_OUTCOME = "reviewed"
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
#: A task's settings (``TaskSettings``: checks, review, model, approval) as one JSON text
#: column, the same DDL on every backend; each backend also widens ``block_kind`` for
#: the kinds these settings can end a task with (``SETTINGS_KINDS``).
SETTINGS_COLUMN = "ALTER TABLE tasks ADD COLUMN settings text"
SETTINGS_KINDS = ("checks", "review", "denied")
#: A migration statement: SQL, or a function for what static SQL cannot say.
Statement = str | Callable[[Connection], None]


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

