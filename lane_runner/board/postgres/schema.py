"""The PostgreSQL board's schema: its migration steps, in order (append, never edit).

The portable steps every SQL backend shares are ``board/sql/schema.py``'s; the server-side
transitions' steps are ``transitions.py``'s.
"""

from __future__ import annotations

from lane_runner.board.postgres.transitions import (
    APPROVAL_CLAIM_STEP,
    GATE_STEP,
    SETTINGS_STEP,
    SKIP_STEP,
    TRANSITIONS,
)
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
)


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


#: The first step's block kinds; the budget step widens the check.
_KINDS = _in(FIRST_BLOCK_KINDS)


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
            status text NOT NULL CHECK (status IN {_in(FIRST_STATUSES)}),
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
            outcome text CHECK (outcome IS NULL OR outcome IN {_in(FIRST_OUTCOMES)}),
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
    # Claim, heartbeat and completion as server-side functions (``board/postgres/transitions.py``):
    # their current definitions, which every later step that changes them installs again.
    TRANSITIONS,
    # The board gate and run ids from a sequence: claims and completions side by side.
    GATE_STEP,
    # The usage ledger every runner of a board shares (``SharedLedger``).
    USAGE_STEP,
    # The claim passes over the workspaces the storm breaker marks broken.
    SKIP_STEP,
    # A task's settings (checks, review, model, approval) and the kinds they can block
    # with; the claim returns the new column, so it is installed again.
    (
        "ALTER TABLE tasks DROP CONSTRAINT tasks_block_kind_check",
        "ALTER TABLE tasks ADD CONSTRAINT tasks_block_kind_check CHECK (block_kind IS NULL "
        f"OR block_kind IN {_in((*FIRST_BLOCK_KINDS, BUDGET_KIND, *SETTINGS_KINDS))})",
        SETTINGS_COLUMN,
        *SETTINGS_STEP,
    ),
    # The notification outbox every runner of a board shares (``Outbox``).
    OUTBOX_STEP,
    # The approval gate: a task's decision, the codes used, the claim that waits for it.
    (*APPROVAL_STEP, *APPROVAL_CLAIM_STEP),
    # A reviewer's run of its own beside the implementer's (``ReviewRuns``): its role,
    # the run it reviews, the outcome ``reviewed``; the heartbeat keeps a review run's
    # lease while the run it reviews is the task's, so the transitions are installed again.
    (
        *REVIEW_RUN_COLUMNS,
        "ALTER TABLE runs DROP CONSTRAINT runs_outcome_check",
        "ALTER TABLE runs ADD CONSTRAINT runs_outcome_check CHECK "
        f"(outcome IS NULL OR outcome IN {_in((*FIRST_OUTCOMES, REVIEWED_OUTCOME))})",
        *TRANSITIONS,
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
