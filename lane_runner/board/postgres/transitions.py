"""The hot transitions on PostgreSQL as server-side functions: one round trip each.

(And the stop request a runner reads at each heartbeat, as one statement.)

A claim, a heartbeat and a completion through ``board/sql/`` cost about 25
round trips between them (every statement, ``BEGIN``/``COMMIT``, the lock
timeout); with hundreds of runners on one server that is the fleet's ceiling.
Here each is one call of a PL/pgSQL function, installed and upgraded by the
board's migrations (``TRANSITIONS_STEP``), sent as one statement outside an
explicit transaction, so PostgreSQL wraps it in one of its own.

``board/sql/`` stays the reference, and SQLite's implementation: each
function takes the same locks in the same order (the task's row, then the
board's), reads what the reference reads, asks the same questions of the same
state, and writes the same rows and events in the same order. Where a rule
lives in ``board/rules.py`` the function restates it in SQL, and the board
contract suite and the state machine (tests/board) hold both paths to one
behaviour; tests/board/test_transitions_agree.py runs random sequences through
both and compares the boards they leave.

What differs from the reference, on purpose: a claim sends no ``NOTIFY`` (it
makes nothing claimable for anyone else), and a completion sends one only when
it promoted a child. This store's own commits still wake its own daemon.

**The board gate.** Every transition that writes an event holds the board's gate
(``lane_runner_lock_board``: an advisory lock on the board's name) from before it
takes an id to its commit. Claims and completions hold it *shared*, so runners'
claims and completions commit side by side and share the server's WAL flushes;
every other transition (the reference's, through ``PostgresBoardDialect``) holds it
*exclusive*, and so sees every claim and completion committed before it (a pause
keeps later claims out, a new task sees its parents' state). Run ids come from
one sequence, ``lane_runner_run_ids``: unique, and increasing per task (its claims
are one at a time under its row lock), though runs of different tasks may commit
out of id order. Event ids may commit out of order too, and readers are kept from
ever skipping one by ``lane_runner_settled_events``: it takes the gate exclusive
for an instant, when no event of the board is in flight, and reads the board's
last event id; a reader of ``events(after_id)`` reads up to that id, every event
at or below it already committed. (A read of one task's events needs no horizon: each
is written under the task's row lock, so they commit in id order.) A completion
that may promote children locks their rows before it decides, so two completions of
two parents of one child take turns on the child, and the second sees the first's
parent done.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import orjson

from lane_runner.board import rules
from lane_runner.board.model import Approval, Claim, CompleteOutcome, StopRequest
from lane_runner.board.rows import run_from_row, stop_from_row, task_from_row
from lane_runner.board.sql.board import SqlBoard
from lane_runner.board.sql.dialect import Dialect
from lane_runner.names import AUTO_ASSIGNEE, LANE_PATTERN

#: The columns of ``tasks`` and ``runs`` (schema version 12) that a claim returns, prefixed
#: ``t_`` and ``r_`` in the function's result.
TASK_COLUMNS = (
    ("board", "text"), ("id", "text"), ("seq", "bigint"), ("title", "text"), ("body", "text"),
    ("status", "text"), ("assignee", "text"), ("priority", "integer"), ("workspace", "text"),
    ("max_runtime", "double precision"), ("goal_turns", "integer"),
    ("current_run_id", "bigint"), ("completed_run_id", "bigint"),
    ("next_attempt_at", "double precision"), ("block_reason", "text"), ("block_kind", "text"),
    ("summary", "text"), ("result", "text"), ("failure_count", "integer"),
    ("created_at", "double precision"), ("updated_at", "double precision"),
    ("max_retries", "integer"), ("max_cost_usd", "double precision"), ("max_tokens", "bigint"),
    ("settings", "text"),
    ("decision", "text"), ("decided_by", "text"), ("decided_at", "double precision"),
)
RUN_COLUMNS = (
    ("board", "text"), ("id", "bigint"), ("task_id", "text"), ("node", "text"),
    ("claimed_at", "double precision"), ("lease_expires_at", "double precision"),
    ("heartbeat_at", "double precision"), ("ended_at", "double precision"),
    ("outcome", "text"), ("reason", "text"), ("stop_requested_at", "double precision"),
    ("stop_reason", "text"), ("stop_requeue", "integer"),
)
_CLAIM_RESULT = ", ".join(
    [f"t_{name} {kind}" for name, kind in TASK_COLUMNS]
    + [f"r_{name} {kind}" for name, kind in RUN_COLUMNS]
    + ["parents text[]"]
)
_CLAIM_ROW = ", ".join(
    [f"v_task.{name}" for name, _ in TASK_COLUMNS] + [f"v_run.{name}" for name, _ in RUN_COLUMNS]
)
_NOW = "extract(epoch FROM clock_timestamp())::float8"

#: The first key of the board gate's advisory lock ("LR"); the second is the board's hash.
#: Two boards whose names hash alike share a gate: they wait on each other, nothing worse.
GATE_KEY = 0x4C52

#: The gate and the events' horizon (see the module's docstring). ``lock_board`` reads the
#: board's row and the clock, and with ``p_new_run`` the next run id, after the gate is
#: granted; no time: the board is gone.
GATE_FUNCTIONS: tuple[str, ...] = (
    f"""CREATE OR REPLACE FUNCTION lane_runner_lock_board(
        p_board text, p_shared boolean, p_new_run boolean,
        OUT locked_at double precision, OUT run_id bigint) LANGUAGE plpgsql AS $$
    BEGIN
        IF p_shared THEN
            PERFORM pg_advisory_xact_lock_shared({GATE_KEY}, hashtext(p_board));
        ELSE
            PERFORM pg_advisory_xact_lock({GATE_KEY}, hashtext(p_board));
        END IF;
        SELECT {_NOW}, CASE WHEN p_new_run THEN nextval('lane_runner_run_ids') END
          INTO locked_at, run_id FROM boards b WHERE b.slug = p_board;
    END $$""",
    f"""CREATE OR REPLACE FUNCTION lane_runner_settled_events(
        p_board text, p_lock_timeout text)
    RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
        v_last bigint;
    BEGIN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
        PERFORM pg_advisory_xact_lock({GATE_KEY}, hashtext(p_board));
        SELECT coalesce(max(e.id), 0) INTO v_last FROM events e WHERE e.board = p_board;
        RETURN v_last;
    END $$""",
)

#: The hot transitions, as they are now. Step 5 installed them; a step that changes them
#: (or what they call) installs them again (CREATE OR REPLACE keeps their names, which
#: include their argument lists).
TRANSITIONS: tuple[str, ...] = (
    # The claim: the first claimable task nobody else holds (SKIP LOCKED) outside the
    # workspaces to skip, passed over when its assignee is another runner's; the board's
    # gate, shared, and the run id; the run, unless the board is paused; the task; the
    # claimed event.
    f"""CREATE OR REPLACE FUNCTION lane_runner_claim(
        p_board text, p_node text, p_lease_ttl double precision, p_default_assignee text,
        p_lanes text, p_event text, p_now double precision, p_lock_timeout text,
        p_skip_workspaces text[], p_default_approval text)
    RETURNS TABLE ({_CLAIM_RESULT}) LANGUAGE plpgsql AS $$
    DECLARE
        v_task tasks%ROWTYPE;
        v_run runs%ROWTYPE;
        v_assignee text;
        v_run_id bigint;
        v_gate record;
        v_now double precision;
        v_passed text[] := '{{}}';
    BEGIN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
        LOOP
            SELECT * INTO v_task FROM tasks t
             WHERE t.board = p_board AND t.status = 'ready'
               AND (t.next_attempt_at IS NULL OR t.next_attempt_at <= coalesce(p_now, {_NOW}))
               AND (t.assignee IS NOT NULL OR p_default_assignee <> '')
               AND (t.workspace IS NULL OR t.workspace <> ALL (p_skip_workspaces))
               AND NOT (coalesce(t.settings::jsonb ->> 'approval', p_default_approval)
                            = 'before_run'
                        AND (t.decision IS NULL OR t.decision <> 'approved'))
               AND t.id <> ALL (v_passed)
             ORDER BY t.priority DESC, t.created_at, t.seq LIMIT 1
             FOR NO KEY UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                RETURN;
            END IF;
            v_assignee := CASE
                WHEN v_task.assignee IS NULL THEN p_default_assignee
                WHEN v_task.assignee ~ p_lanes THEN v_task.assignee
            END;
            EXIT WHEN v_assignee IS NOT NULL;
            v_passed := v_passed || v_task.id;
        END LOOP;
        v_gate := lane_runner_lock_board(p_board, true, true);
        v_run_id := v_gate.run_id;
        v_now := v_gate.locked_at;
        IF v_now IS NULL THEN
            RAISE EXCEPTION 'board % no longer exists', p_board USING ERRCODE = 'P0002';
        END IF;
        v_now := coalesce(p_now, v_now);
        INSERT INTO runs (board, id, task_id, node, claimed_at, lease_expires_at, heartbeat_at)
            SELECT p_board, v_run_id, v_task.id, p_node, v_now, v_now + p_lease_ttl, v_now
            WHERE NOT EXISTS (SELECT 1 FROM board_pauses p WHERE p.board = p_board)
            RETURNING * INTO v_run;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        UPDATE tasks t SET status = 'running', assignee = v_assignee,
            current_run_id = v_run_id, updated_at = v_now
            WHERE t.board = p_board AND t.id = v_task.id RETURNING * INTO v_task;
        INSERT INTO events (board, task_id, kind, run_id, at, data)
            VALUES (p_board, v_task.id, 'claimed', v_run_id, v_now, p_event);
        RETURN QUERY SELECT {_CLAIM_ROW}, ARRAY(
            SELECT l.parent_id FROM task_links l
             WHERE l.board = p_board AND l.task_id = v_task.id ORDER BY l.position);
    END $$""",
    # The heartbeat: the reference's one statement, with the lock timeout and the clock;
    # a review run's lease lasts while the run it reviews is its task's.
    f"""CREATE OR REPLACE FUNCTION lane_runner_heartbeat(
        p_board text, p_run bigint, p_lease_ttl double precision, p_now double precision,
        p_lock_timeout text)
    RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
        v_now double precision;
    BEGIN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
        v_now := coalesce(p_now, {_NOW});
        UPDATE runs r SET lease_expires_at = v_now + p_lease_ttl, heartbeat_at = v_now
         WHERE r.board = p_board AND r.id = p_run AND r.ended_at IS NULL AND EXISTS (
             SELECT 1 FROM tasks t WHERE t.board = r.board
                AND t.current_run_id = coalesce(r.for_run, r.id) AND t.status = 'running');
        RETURN FOUND;
    END $$""",
    # The completion: the run's task row-locked, its latest ended run, the decision of
    # rules.completion; then the board's gate, shared, the run, the task, the event, and
    # the children waiting only on this task, row-locked and then promoted in task id
    # order. NOTIFY (p_channel, p_token) only when a child became ready.
    """CREATE OR REPLACE FUNCTION lane_runner_complete(
        p_board text, p_run bigint, p_result text, p_summary text, p_event text,
        p_now double precision, p_lock_timeout text, p_channel text, p_token text)
    RETURNS text LANGUAGE plpgsql AS $$
    DECLARE
        v_task tasks%ROWTYPE;
        v_latest bigint;
        v_outcome text;
        v_gate record;
        v_now double precision;
        v_child text;
        v_promoted boolean := false;
    BEGIN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
        SELECT * INTO v_task FROM tasks t WHERE t.board = p_board AND t.id = (
            SELECT r.task_id FROM runs r WHERE r.board = p_board AND r.id = p_run)
            FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RETURN 'stale';
        END IF;
        SELECT max(r.id) INTO v_latest FROM runs r
         WHERE r.board = p_board AND r.task_id = v_task.id AND r.ended_at IS NOT NULL
           AND r.role = 'implement';
        v_outcome := CASE
            WHEN v_task.status = 'running' AND v_task.current_run_id = p_run THEN 'completed'
            WHEN v_task.status = 'done' AND v_task.completed_run_id = p_run THEN
                CASE WHEN v_task.result = p_result THEN 'duplicate' ELSE 'stale' END
            WHEN v_task.status IN ('ready', 'blocked') AND v_latest = p_run THEN 'replayed'
            ELSE 'stale'
        END;
        IF v_outcome NOT IN ('completed', 'replayed') THEN
            RETURN v_outcome;
        END IF;
        v_gate := lane_runner_lock_board(p_board, true, false);
        v_now := v_gate.locked_at;
        IF v_now IS NULL THEN
            RAISE EXCEPTION 'board % no longer exists', p_board USING ERRCODE = 'P0002';
        END IF;
        v_now := coalesce(p_now, v_now);
        IF v_outcome = 'completed' THEN
            UPDATE runs r SET ended_at = v_now, outcome = 'completed', reason = NULL
             WHERE r.board = p_board AND r.id = p_run AND r.ended_at IS NULL;
        ELSE
            UPDATE runs r SET outcome = 'completed' WHERE r.board = p_board AND r.id = p_run;
        END IF;
        UPDATE runs r SET ended_at = v_now, outcome = 'reclaimed',
            reason = 'run ' || p_run || ', which it reviewed, ended'
         WHERE r.board = p_board AND r.for_run = p_run AND r.ended_at IS NULL;
        UPDATE tasks t SET status = 'done', current_run_id = NULL, completed_run_id = p_run,
            summary = p_summary, result = p_result, failure_count = 0, next_attempt_at = NULL,
            block_reason = NULL, block_kind = NULL, updated_at = v_now
         WHERE t.board = p_board AND t.id = v_task.id;
        INSERT INTO events (board, task_id, kind, run_id, at, data)
            VALUES (p_board, v_task.id, v_outcome, p_run, v_now, p_event);
        IF EXISTS (SELECT 1 FROM task_links l
                    WHERE l.board = p_board AND l.parent_id = v_task.id) THEN
            PERFORM 1 FROM tasks c JOIN task_links l ON l.board = c.board AND l.task_id = c.id
             WHERE l.board = p_board AND l.parent_id = v_task.id AND c.status = 'todo'
             ORDER BY c.id FOR NO KEY UPDATE OF c;
            FOR v_child IN
                SELECT c.id FROM tasks c JOIN task_links l ON l.board = c.board AND l.task_id = c.id
                 WHERE l.board = p_board AND l.parent_id = v_task.id AND c.status = 'todo'
                   AND NOT EXISTS (
                       SELECT 1 FROM task_links o JOIN tasks p ON p.board = o.board
                          AND p.id = o.parent_id
                        WHERE o.board = p_board AND o.task_id = c.id AND p.status <> 'done')
                 ORDER BY c.id
            LOOP
                UPDATE tasks t SET status = 'ready', updated_at = v_now
                 WHERE t.board = p_board AND t.id = v_child;
                INSERT INTO events (board, task_id, kind, run_id, at, data)
                    VALUES (p_board, v_child, 'promoted', NULL, v_now,
                            '{"parent":' || to_json(v_task.id)::text || '}');
                v_promoted := true;
            END LOOP;
        END IF;
        IF v_promoted THEN
            PERFORM pg_notify(p_channel, p_token);
        END IF;
        RETURN v_outcome;
    END $$""",
)

#: Migration step 6: run ids from one sequence (starting past every board's counter), the
#: gate, and the transitions that take it.
GATE_STEP: tuple[str, ...] = (
    "CREATE SEQUENCE lane_runner_run_ids",
    "SELECT setval('lane_runner_run_ids', coalesce((SELECT max(next_run_id) FROM boards), 0) "
    "+ 1, false)",
    "ALTER TABLE boards DROP COLUMN next_run_id",
    *GATE_FUNCTIONS,
    *TRANSITIONS,
)

#: Migration step 8: the claim passes over the tasks of the workspaces it is given (those
#: the storm breaker marks broken); its new argument makes it a new function, so the old
#: one goes (a runner still calling it finds the board unavailable until it is upgraded).
SKIP_STEP: tuple[str, ...] = (
    "DROP FUNCTION IF EXISTS lane_runner_claim(text, text, double precision, text, text, "
    "text, double precision, text)",
    *TRANSITIONS,
)

#: Migration step 10: the claim returns the task's settings; a new result type makes it
#: a new function, so the old one goes first.
SETTINGS_STEP: tuple[str, ...] = (
    "DROP FUNCTION IF EXISTS lane_runner_claim(text, text, double precision, text, text, "
    "text, double precision, text, text[])",
    *TRANSITIONS,
)


#: Migration step 12: the claim passes over tasks waiting for approval before they run
#: (docs/approvals.md), and returns the task's decision; its new argument and result
#: make it a new function, so the old one goes.
APPROVAL_CLAIM_STEP: tuple[str, ...] = (
    "DROP FUNCTION IF EXISTS lane_runner_claim(text, text, double precision, text, text, "
    "text, double precision, text, text[])",
    *TRANSITIONS,
)


def _row(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {key[len(prefix):]: value for key, value in values.items() if key.startswith(prefix)}


#: ``Database.call``: one statement, bounded and retried; its first row (None: no row);
#: ``changed(row)`` true wakes this store's own daemon.
Call = Callable[..., Any]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


class PostgresBoard(SqlBoard):
    """``SqlBoard`` with claim, heartbeat and completion as one function call each."""

    def __init__(
        self,
        slug: str,
        dialect: Dialect,
        failure_limit: int,
        call: Call,
        clock: Callable[[], float] | None,
    ) -> None:
        super().__init__(slug, dialect, failure_limit)
        self._call = call
        self._clock = clock

    def _now(self) -> float | None:
        """The test's clock when it has one; None: the server's, read in the function."""
        return None if self._clock is None else self._clock()

    def claim(
        self,
        node: str,
        lease_ttl: float,
        default_assignee: str,
        skip_workspaces: Collection[str] = (),
        default_approval: Approval = Approval.NONE,
    ) -> Claim | None:
        rules.require_lease_ttl(lease_ttl)
        row = self._call(
            "SELECT * FROM lane_runner_claim(%(board)s, %(node)s, %(ttl)s, %(default)s, "
            "%(lanes)s, %(event)s, %(now)s, %(lock_timeout)s, %(skip)s::text[], "
            "%(approval)s)",
            {
                "board": self.slug, "node": node, "ttl": lease_ttl,
                "default": default_assignee or "", "lanes": LANES,
                "event": _json({"node": node}), "now": self._now(),
                "skip": sorted(skip_workspaces),
                "approval": Approval(default_approval).value,
            },
            changed=lambda found: found is not None,
        )
        if row is None:
            return None
        task = task_from_row(_row(row, "t_"), self.slug, tuple(row["parents"]))
        return Claim(task, run_from_row(_row(row, "r_"), self.slug))

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        row = self._call(
            "SELECT lane_runner_heartbeat(%(board)s, %(run)s, %(ttl)s, %(now)s, "
            "%(lock_timeout)s) AS renewed",
            {"board": self.slug, "run": run_id, "ttl": lease_ttl, "now": self._now()},
        )
        return bool(row["renewed"])

    def stop_request(self, run_id: int) -> StopRequest | None:
        """The reference's one read, as one statement (each heartbeat asks): no BEGIN/COMMIT."""
        row = self._call(
            "SELECT * FROM runs WHERE board = %(board)s AND id = %(run)s AND ended_at IS NULL",
            {"board": self.slug, "run": run_id},
        )
        return None if row is None else stop_from_row(row)

    def complete(
        self,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        metadata: dict[str, Any] | None = None,
    ) -> CompleteOutcome:
        extra = {"metadata": rules.storable(metadata)} if metadata else {}
        row = self._call(
            "SELECT lane_runner_complete(%(board)s, %(run)s, %(result)s, %(summary)s, "
            "%(event)s, %(now)s, %(lock_timeout)s, %(channel)s, %(token)s) AS outcome",
            {
                "board": self.slug, "run": run_id,
                "result": rules.canonical_json(result).decode("utf-8"), "summary": summary,
                "event": _json(extra), "now": self._now(),
            },
            changed=lambda found: found["outcome"] in ("completed", "replayed"),
        )
        return CompleteOutcome(row["outcome"])


#: The assignees a claim takes as they are (``names.is_lane_assignee``), as a PostgreSQL
#: regular expression: the same pattern, anchored as ``fullmatch`` is.
LANES = f"^(?:{AUTO_ASSIGNEE}|{LANE_PATTERN})$"
