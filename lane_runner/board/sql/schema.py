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

