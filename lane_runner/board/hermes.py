"""A Hermes Agent Kanban home as a board store: lane-runner as an external lane of Hermes.

Hermes leaves tasks whose assignee is not one of its profiles to control-plane
lanes that pull them with ``claim_task``; lane-runner is such a lane for the
``cli-*`` assignees (docs/ARCHITECTURE.md §3.4, §5). Every write goes through
Hermes's own calls (``claim_task``, ``heartbeat_claim``, ``heartbeat_worker``,
``complete_task``, ``block_task``, ``add_comment``) so Hermes's events, hooks,
child promotion and scratch clean-up happen as for its own workers. Where
upstream offers no exact-run guard (``reclaim_task`` takes no run id), the
transition is written in one of Hermes's own write transactions, guarded on the
task's current run, with Hermes's own run and event writers.

Exactly once: a completion records the run id and the journal digest in the
run's metadata (``lane_runner``); a replay finds the task done by that very run
with that digest and answers ``duplicate``, and a run that is no longer the
task's current one is ``stale``. Hermes keeps no "completed by run" on the task,
so the completed ``task_runs`` row is the witness.

Threads: each operation opens its own short connection (Hermes connections are
bound to the thread that made them), under ``scoped_current_board`` so Hermes's
path functions name the right board.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from lane_runner import files, suggest
from lane_runner.board import hermes_home, hermes_txn, retry, rules
from lane_runner.board import hermes_rows as rows
from lane_runner.board.base import BoardUnavailable, Creating, HostWorkspace, WorkspaceUnusable
from lane_runner.board.gate import RedactedWrites
from lane_runner.board.hermes_watch import HermesWatch
from lane_runner.board.model import (
    BlockKind,
    BoardPause,
    Claim,
    Comment,
    CompleteOutcome,
    Event,
    NewTask,
    Outcome,
    Run,
    Status,
    StopRequest,
    Task,
    TaskEdit,
)
from lane_runner.errors import NotFound, UsageError
from lane_runner.names import is_lane_assignee

log = logging.getLogger(__name__)
T = TypeVar("T")
Clock = Callable[[], float]

AUTHOR = "lane-runner"
#: Hermes's workspace kinds it keeps after completion (it removes ``scratch``).
KEPT_WORKSPACES = ("dir", "worktree")
#: Ready, unclaimed tasks in claim order, each with the cooldown its latest ended run
#: records (docs/ARCHITECTURE.md §5): one statement per sweep, however many are cooling.
CANDIDATES = (
    "SELECT t.id, t.assignee, t.workspace_kind, t.workspace_path, "
    "(SELECT CASE WHEN json_valid(r.metadata) THEN "
    f"json_extract(r.metadata, '$.{rows.MARK}.next_attempt_at') END FROM task_runs r "
    "WHERE r.task_id = t.id AND r.ended_at IS NOT NULL ORDER BY r.id DESC LIMIT 1) "
    "AS next_attempt_at FROM tasks t WHERE t.status = 'ready' AND t.claim_lock IS NULL "
    "ORDER BY t.priority DESC, t.created_at, t.rowid"
)
UNCONTROLLED = (
    "a Hermes board has no lane-runner {what}: its tasks and dispatch are Hermes's. "
    "{instead}, or 'lane-runner pause' to hold this runner"
)
#: What Hermes 0.19 offers instead of a board pause: its dispatcher runs in its gateway.
HERMES_DISPATCH = (
    "Hermes's own dispatcher is switched with 'hermes config set kanban.dispatch_in_gateway "
    "{value}' (then 'hermes gateway restart')"
)
READ_ONLY = (
    "lane-runner does not {what} on a Hermes board: Hermes owns its tasks. "
    "Use 'hermes kanban {command}'"
)


class HermesBoard(RedactedWrites):
    """One Hermes board (one ``kanban.db``). Methods are safe to call from several threads."""

    def __init__(
        self, slug: str, path: Path, kb: ModuleType, failure_limit: int, budget: float
    ) -> None:
        self.slug = slug
        self.path = path
        self._kb = kb
        self._failure_limit = failure_limit
        # Hermes waits 120 s on a locked database; a runner waits its budget
        # (board/retry.py), then skips the board and comes back.
        self._busy_timeout_ms = max(1, int(budget * 1000))
        self._schema_checked = False

    # -- storage plumbing ------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if not self.path.is_file():
            # Hermes's connect would create an empty board here; this one is gone.
            raise BoardUnavailable(f"Hermes board {self.slug!r}: {self.path} no longer exists")
        with self._kb.scoped_current_board(self.slug):
            connection = self._kb.connect(db_path=self.path)
            try:
                connection.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                if not self._schema_checked:
                    self._check_schema(connection)
                yield connection
            finally:
                connection.close()

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        missing = hermes_home.missing_columns(connection)
        if missing:
            raise BoardUnavailable(
                f"Hermes board {self.slug!r} ({self.path}) lacks {', '.join(missing)}: "
                "it was made by another Hermes release; open it once with "
                f"hermes-agent>=0.19 ('hermes kanban --board {self.slug} list') so Hermes "
                "migrates it"
            )
        self._schema_checked = True

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on a fresh connection; storage trouble becomes ``BoardUnavailable``."""
        try:
            with self._connection() as connection:
                return work(connection)
        except (sqlite3.Error, OSError, self._kb.KanbanDbCorruptError) as error:
            raise BoardUnavailable(
                f"Hermes board {self.slug!r} ({self.path}) is unavailable: {error}; "
                "lane-runner skips it and retries (if it stays unavailable, run "
                f"'hermes kanban --board {self.slug} list': Hermes checks the database and "
                "says whether it is corrupt, keeping a backup beside it)"
            ) from error

    # -- reading -----------------------------------------------------------------

    def _task_row(self, connection: sqlite3.Connection, task_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = connection.execute(
            "SELECT * FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise NotFound(
                f"no task {task_id!r} on Hermes board {self.slug!r}; "
                f"see 'lane-runner task ls --board {self.slug}'"
            )
        return row

    @staticmethod
    def _last_ended(connection: sqlite3.Connection, task_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = connection.execute(
            "SELECT * FROM task_runs WHERE task_id = ? AND ended_at IS NOT NULL "
            "ORDER BY id DESC LIMIT 1",
            (task_id,),
        ).fetchone()
        return row

    def _task(self, connection: sqlite3.Connection, task_id: str) -> Task:
        row = self._task_row(connection, task_id)
        parents = tuple(
            r[0]
            for r in connection.execute(
                "SELECT parent_id FROM task_links WHERE child_id = ? ORDER BY rowid", (task_id,)
            )
        )
        return rows.task(row, self.slug, parents, self._last_ended(connection, task_id))

    def _run(self, connection: sqlite3.Connection, run_id: int) -> Run:
        row = connection.execute(
            "SELECT r.*, (SELECT json_extract(e.payload, '$.lock') FROM task_events e "
            "WHERE e.run_id = r.id AND e.kind = 'claimed' ORDER BY e.id LIMIT 1) AS claimed_lock "
            "FROM task_runs r WHERE r.id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id} on Hermes board {self.slug!r}")
        return rows.run(row, self.slug, row["claimed_lock"])

    def get_task(self, task_id: str) -> Task:
        return self._call(lambda c: self._task(c, task_id))

    def list_tasks(self, status: Status | None = None) -> list[Task]:
        def work(connection: sqlite3.Connection) -> list[Task]:
            ids = [r[0] for r in connection.execute("SELECT id FROM tasks ORDER BY created_at, id")]
            tasks = [self._task(connection, task_id) for task_id in ids]
            return [t for t in tasks if status is None or t.status is Status(status)]

        return self._call(work)

    def comment(self, task_id: str, body: str, author: str = "operator") -> Comment:
        rules.check_comment(body)

        def work(connection: sqlite3.Connection) -> Comment:
            self._task_row(connection, task_id)
            comment_id = self._kb.add_comment(connection, task_id, author, body)
            row = connection.execute(
                "SELECT * FROM task_comments WHERE id = ?", (comment_id,)
            ).fetchone()
            return rows.comment(row, self.slug)

        return self._call(work)

    def comments(self, task_id: str, limit: int | None = None) -> list[Comment]:
        def work(connection: sqlite3.Connection) -> list[Comment]:
            self._task_row(connection, task_id)
            found = connection.execute(
                "SELECT * FROM (SELECT * FROM task_comments WHERE task_id = ? ORDER BY id DESC "
                "LIMIT ?) ORDER BY id",
                (task_id, -1 if limit is None else limit),
            )
            return [rows.comment(row, self.slug) for row in found]

        return self._call(work)

    def events(self, task_id: str | None = None, after_id: int = 0) -> list[Event]:
        def work(connection: sqlite3.Connection) -> list[Event]:
            if task_id is None:
                found = connection.execute(
                    "SELECT * FROM task_events WHERE id > ? ORDER BY id", (after_id,)
                )
            else:
                self._task_row(connection, task_id)
                found = connection.execute(
                    "SELECT * FROM task_events WHERE task_id = ? AND id > ? ORDER BY id",
                    (task_id, after_id),
                )
            return [rows.event(row, self.slug) for row in found]

        return self._call(work)

    def runs(self, task_id: str) -> list[Run]:
        def work(connection: sqlite3.Connection) -> list[Run]:
            self._task_row(connection, task_id)
            ids = connection.execute(
                "SELECT id FROM task_runs WHERE task_id = ? ORDER BY id", (task_id,)
            )
            return [self._run(connection, int(r[0])) for r in ids]

        return self._call(work)

    def get_run(self, run_id: int) -> Run:
        return self._call(lambda c: self._run(c, run_id))

    def counts(self) -> dict[str, int]:
        def work(connection: sqlite3.Connection) -> dict[str, int]:
            counted = dict.fromkeys((s.value for s in Status), 0)
            for status, n in connection.execute("SELECT status, COUNT(*) FROM tasks GROUP BY 1"):
                counted[rows.STATUSES.get(status, Status.TODO).value] += n
            return counted

        return self._call(work)

    def lane_counts(self, default_assignee: str) -> dict[str, int]:
        """Counts of the tasks in our lanes: a profile's ready task is no work for us."""

        def work(connection: sqlite3.Connection) -> dict[str, int]:
            counted = dict.fromkeys((s.value for s in Status), 0)
            for status, assignee in connection.execute("SELECT status, assignee FROM tasks"):
                if rules.claim_assignee(assignee, default_assignee) is not None:
                    counted[rows.STATUSES.get(status, Status.TODO).value] += 1
            return counted

        return self._call(work)

    # -- what belongs to Hermes --------------------------------------------------

    def add_task(self, new: NewTask) -> Task:
        raise UsageError(READ_ONLY.format(what="add tasks", command="create"))

    def unblock(self, task_id: str) -> Task:
        raise UsageError(READ_ONLY.format(what="unblock tasks", command=f"unblock {task_id}"))

    def archive(self, task_id: str) -> Task:
        raise UsageError(READ_ONLY.format(what="archive tasks", command=f"archive {task_id}"))

    def edit(self, task_id: str, edit: TaskEdit) -> Task:
        raise UsageError(
            READ_ONLY.format(what="edit tasks", command=f"assign {task_id} PROFILE")
            + " to reassign it (Hermes has no command that edits a task's title or body)"
        )

    def retry(self, task_id: str, comment: str, author: str = "operator") -> Task:
        raise UsageError(
            READ_ONLY.format(what="retry tasks", command=f"unblock {task_id} --reason TEXT")
        )

    def delete(self, task_id: str, *, force: bool = False) -> Task:
        raise UsageError(READ_ONLY.format(what="delete tasks", command=f"archive {task_id}"))

    # -- what Hermes gives the worker ----------------------------------------------

    def worker_context(self, task_id: str) -> str:
        """Hermes's own worker context: body, prior attempts, parents' handoffs, comments."""
        return str(self._call(lambda c: self._kb.build_worker_context(c, task_id)))

    def prepare_workspace(self, task_id: str, creating: Creating) -> HostWorkspace:
        """The task's workspace by Hermes's kind (docs/ARCHITECTURE.md §5).

        ``scratch`` is Hermes's own directory for the task, and ``worktree`` Hermes's own
        worktree of it (made under ``creating``, so never beside another ``git worktree
        add`` of this runner in that repository). A ``dir:`` is the directory Hermes
        names, ``shared``: in a repository the runner works in its own worktree of it.
        Each is written back as Hermes does.
        """

        def work(connection: sqlite3.Connection) -> HostWorkspace:
            hermes_task = self._kb.get_task(connection, task_id)
            if hermes_task is None:
                raise NotFound(f"no task {task_id!r} on Hermes board {self.slug!r}")
            try:
                return self._workspace(connection, hermes_task, creating)
            except (ValueError, RuntimeError, OSError) as error:
                named = rows.workspace(hermes_task.workspace_kind, hermes_task.workspace_path)
                raise WorkspaceUnusable(f"Hermes workspace {named} is unusable: {error}") from error

        return self._call(work)

    def _workspace(
        self, connection: sqlite3.Connection, hermes_task: Any, creating: Creating
    ) -> HostWorkspace:
        kind = hermes_task.workspace_kind or "scratch"
        if kind == "worktree":
            repository = self._worktree_repository(hermes_task)
            # No repository named: Hermes's resolver refuses the task, nothing is made.
            with creating(repository) if repository else contextlib.nullcontext():
                path, branch = self._kb._resolve_worktree_workspace(hermes_task, board=self.slug)
            self._kb.set_branch_name(connection, hermes_task.id, branch)
        else:
            path = self._kb.resolve_workspace(hermes_task, board=self.slug)
        self._kb.set_workspace_path(connection, hermes_task.id, str(path))
        return HostWorkspace(Path(path), shared=kind == "dir")

    def _worktree_repository(self, hermes_task: Any) -> Path | None:
        """The repository Hermes makes a ``worktree`` task's worktree of: its path's, or
        the board's ``default_workdir``'s (the key of the runner's creation lock)."""
        anchor = hermes_task.workspace_path or self._kb.read_board_metadata(self.slug).get(
            "default_workdir"
        )
        if not anchor:
            return None
        requested = Path(str(anchor)).expanduser()
        return Path(self._kb._repo_root_for_worktree_target(requested) or requested)

    def record_workspace(self, task_id: str, path: Path) -> None:
        """Hermes's ``set_workspace_path``: ``hermes kanban show`` names the runner's worktree."""
        self._call(lambda c: self._kb.set_workspace_path(c, task_id, str(path)))

    def link_worker_log(self, task_id: str, log_file: Path) -> None:
        """Hermes's worker log of the task (``hermes kanban log``) becomes a link to ``log_file``.

        A log a Hermes worker left there is first rotated aside the way Hermes rotates
        its logs. Trouble here costs only Hermes's view of the log, which stays in the
        runner's home ('lane-runner logs'), so it is logged, not raised.
        """
        place = Path(self._kb.worker_log_path(task_id, board=self.slug))
        try:
            if place.is_symlink() and Path(os.readlink(place)) == log_file:
                return
            if place.exists() and not place.is_symlink():
                self._kb._rotate_worker_log(place, 0)
            place.parent.mkdir(parents=True, exist_ok=True)
            staged = place.with_name(f".{place.name}.{os.getpid()}.link")
            staged.unlink(missing_ok=True)
            os.symlink(log_file, staged)
            os.replace(staged, place)
        except OSError as error:
            log.warning("task %s: Hermes's worker log %s not linked: %s", task_id, place, error)

    # -- the run lifecycle -----------------------------------------------------------

    def claim(
        self,
        node: str,
        lease_ttl: float,
        default_assignee: str,
        skip_workspaces: Collection[str] = (),
    ) -> Claim | None:
        if not lease_ttl > 0:
            raise UsageError(f"lease ttl must be more than 0 seconds, not {lease_ttl:g}")

        def work(connection: sqlite3.Connection) -> Claim | None:
            now = time.time()
            for candidate in connection.execute(CANDIDATES).fetchall():
                task_id, assignee = candidate["id"], candidate["assignee"]
                lane = rules.claim_assignee(assignee, default_assignee)
                until = candidate["next_attempt_at"]
                if lane is None or (isinstance(until, int | float) and until > now):
                    continue
                kind, path = candidate["workspace_kind"], candidate["workspace_path"]
                if skip_workspaces and rows.workspace(kind, path) in skip_workspaces:
                    continue
                lock = rows.lock(node, secrets.token_hex(6))
                if assignee is None:
                    claimed = self._claim_unassigned(connection, task_id, lane, lease_ttl, lock)
                else:
                    claimed = self._kb.claim_task(
                        connection, task_id, ttl_seconds=math.ceil(lease_ttl), claimer=lock
                    )
                if claimed is None or claimed.current_run_id is None:
                    continue  # another runner won it, or Hermes found a parent not done
                run = self._run(connection, int(claimed.current_run_id))
                return Claim(self._task(connection, task_id), run)
            return None

        return self._call(work)

    def _claim_unassigned(
        self, connection: sqlite3.Connection, task_id: str, lane: str, lease_ttl: float, lock: str
    ) -> Any:
        """Hermes's ``assign_task`` to the default lane, then ``claim_task``: one transaction.

        The task is looked at again inside it: another runner may have taken it since
        the sweep read it (and Hermes refuses to reassign a running task).
        """
        with hermes_txn.one_transaction(self._kb, connection) as nested:
            still = nested.execute(
                "SELECT 1 FROM tasks WHERE id = ? AND status = 'ready' AND claim_lock IS NULL "
                "AND assignee IS NULL",
                (task_id,),
            ).fetchone()
            if still is None or not self._kb.assign_task(nested, task_id, lane):
                return None
            return self._kb.claim_task(
                nested, task_id, ttl_seconds=math.ceil(lease_ttl), claimer=lock
            )

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        """Hermes's ``heartbeat_claim`` on this run's own lock, then its liveness note."""

        def work(connection: sqlite3.Connection) -> bool:
            run = connection.execute(
                "SELECT task_id, claim_lock FROM task_runs WHERE id = ? AND ended_at IS NULL",
                (run_id,),
            ).fetchone()
            if run is None or not run["claim_lock"]:
                return False
            task_id = run["task_id"]
            renewed = bool(
                self._kb.heartbeat_claim(
                    connection,
                    task_id,
                    ttl_seconds=math.ceil(lease_ttl),
                    claimer=run["claim_lock"],
                )
            )
            if renewed:
                self._kb.heartbeat_worker(
                    connection,
                    task_id,
                    note=f"{AUTHOR} run {run_id} alive",
                    expected_run_id=run_id,
                )
            return renewed

        return self._call(work)

    def complete(
        self,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        metadata: dict[str, Any] | None = None,
    ) -> CompleteOutcome:
        offered = dict(metadata or {})
        digest = offered.pop("journal_digest", None)
        result_text = rules.canonical_json(result).decode("utf-8")

        def work(connection: sqlite3.Connection) -> CompleteOutcome:
            run = connection.execute(
                "SELECT task_id FROM task_runs WHERE id = ?", (run_id,)
            ).fetchone()
            if run is None:
                return CompleteOutcome.STALE
            task_id = run["task_id"]
            if self._is_current(connection, task_id, run_id):
                kind, place = connection.execute(
                    "SELECT workspace_kind, workspace_path FROM tasks WHERE id = ?", (task_id,)
                ).fetchone()
                artifacts = _placed(place, result.get("artifacts", []))
                hermes_metadata = _completion_metadata(result, artifacts, offered, run_id, digest)
                done = Completion(task_id, run_id, result_text, summary, hermes_metadata)
                if self._complete(connection, done, attach=kind in KEPT_WORKSPACES):
                    return CompleteOutcome.COMPLETED
            return self._settled(connection, task_id, run_id, digest, result)

        return self._call(work)

    @staticmethod
    def _is_current(connection: sqlite3.Connection, task_id: str, run_id: int) -> bool:
        row = connection.execute(
            "SELECT 1 FROM tasks WHERE id = ? AND status = 'running' AND current_run_id = ?",
            (task_id, run_id),
        ).fetchone()
        return row is not None

    def _complete(self, connection: sqlite3.Connection, done: Completion, *, attach: bool) -> bool:
        """Hermes's ``complete_task`` guarded on the run (upstream's ``expected_run_id``).

        With ``attach`` (a workspace Hermes keeps: ``dir:``, ``worktree``) the artifacts
        become the task's attachments in the same transaction; Hermes copies a scratch
        task's artifacts itself before it removes the directory.
        """
        if not attach:
            return self._complete_task(connection, done)
        with hermes_txn.one_transaction(self._kb, connection) as nested:
            completed = self._complete_task(nested, done)
            if completed:
                self._attach(nested, done.task_id, done.metadata.get("artifacts", []))
        return completed

    def _complete_task(self, connection: Any, done: Completion) -> bool:
        try:
            return bool(self._kb.complete_task(connection, done.task_id, **done.arguments()))
        except self._kb.ArtifactPreservationError as error:
            # Hermes copies a scratch task's declared artifacts before it deletes the
            # scratch dir, and refuses the completion when one is missing. The answer
            # matters more than the copy: complete with the list kept as words only.
            log.warning("task %s: artifacts not preserved by Hermes (%s)", done.task_id, error)
            kept = {k: v for k, v in done.metadata.items() if k != "artifacts"}
            kept["declared_artifacts"] = done.metadata.get("artifacts", [])
            arguments = {**done.arguments(), "metadata": kept}
            return bool(self._kb.complete_task(connection, done.task_id, **arguments))

    def _attach(self, connection: Any, task_id: str, artifacts: list[str]) -> None:
        """Copies of the artifacts as Hermes attachments (``hermes kanban attachments``),
        through Hermes's own ``store_attachment_bytes``: its names and its size cap. One
        that cannot be attached is only logged: its path is in the completion anyway."""
        limit = self._kb.KANBAN_ATTACHMENT_MAX_BYTES
        for artifact in artifacts:
            path = Path(artifact)
            try:
                # The worker's file, read by a runner that may be root: no link followed,
                # no FIFO waited on, nothing read past Hermes's own cap.
                data = files.read_workers(path, limit)
                if len(data) > limit:
                    raise self._kb.AttachmentTooLarge(f"over {limit} bytes")
                self._kb.store_attachment_bytes(
                    connection, task_id, path.name, data, uploaded_by=AUTHOR, board=self.slug,
                )
            except (OSError, ValueError) as error:  # AttachmentTooLarge is a ValueError
                log.warning("task %s: artifact %s not attached: %s", task_id, path, error)

    @staticmethod
    def _settled(
        connection: sqlite3.Connection,
        task_id: str,
        run_id: int,
        digest: str | None,
        result: dict[str, Any],
    ) -> CompleteOutcome:
        """Not completed now: ``duplicate`` if this very run already completed it, else stale."""
        task = connection.execute(
            "SELECT status, result FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        done_by = connection.execute(
            "SELECT id, metadata FROM task_runs WHERE task_id = ? AND outcome = 'completed' "
            "ORDER BY id DESC LIMIT 1",
            (task_id,),
        ).fetchone()
        if task is None or task["status"] != "done" or done_by is None or done_by["id"] != run_id:
            return CompleteOutcome.STALE
        ours = rows.mark(done_by["metadata"])
        if digest is not None and ours.get("journal_digest") is not None:
            same = ours["journal_digest"] == digest
        else:
            same = rules.same_result(rows.result_of(task["result"]), result)
        return CompleteOutcome.DUPLICATE if same else CompleteOutcome.STALE

    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool:
        kind = BlockKind(kind)

        def work(connection: sqlite3.Connection) -> bool:
            task_id = self._current_task(connection, run_id)
            if task_id is None:
                return False
            with hermes_txn.one_transaction(self._kb, connection) as nested:
                blocked = bool(
                    self._kb.block_task(
                        nested,
                        task_id,
                        reason=reason,
                        kind=rows.HERMES_KINDS[kind],
                        expected_run_id=run_id,
                    )
                )
                if blocked and count_failure:
                    nested.execute(
                        "UPDATE tasks SET consecutive_failures = consecutive_failures + 1, "
                        "last_failure_error = ? WHERE id = ?",
                        (reason[:500], task_id),
                    )
            return blocked

        return self._call(work)

    @staticmethod
    def _current_task(connection: sqlite3.Connection, run_id: int) -> str | None:
        row = connection.execute(
            "SELECT id FROM tasks WHERE current_run_id = ? AND status = 'running'", (run_id,)
        ).fetchone()
        return None if row is None else str(row["id"])

    def reclaim(
        self,
        run_id: int,
        reason: str,
        outcome: Outcome,
        *,
        count_failure: bool = False,
        cooldown: float | None = None,
    ) -> bool:
        """Running with this run → ready (or blocked past the failure limit), in one transaction.

        Upstream's ``reclaim_task`` releases whatever claim the task holds when it
        runs, so it could end a newer run than the one meant. This is the same
        transition in Hermes's write transaction, guarded on the current run id.
        """
        outcome = rules.check_reclaim_outcome(Outcome(outcome))

        def work(connection: sqlite3.Connection) -> bool:
            with self._kb.write_txn(connection):
                task = connection.execute(
                    "SELECT id, consecutive_failures, max_retries FROM tasks "
                    "WHERE current_run_id = ? AND status = 'running'",
                    (run_id,),
                ).fetchone()
                if task is None:
                    return False
                return self._release(
                    connection, task, run_id, reason, outcome, count_failure, cooldown
                )

        return self._call(work)

    def _release(
        self,
        connection: sqlite3.Connection,
        task: sqlite3.Row,
        run_id: int,
        reason: str,
        outcome: Outcome,
        count_failure: bool,
        cooldown: float | None,
    ) -> bool:
        task_id = task["id"]
        failures = int(task["consecutive_failures"] or 0) + count_failure
        limit = task["max_retries"] if task["max_retries"] is not None else self._failure_limit
        gave_up = count_failure and rules.gives_up(failures, int(limit))
        error = f"gave up after {failures} failures; last: {reason}" if gave_up else reason
        ours: dict[str, Any] = {"outcome": outcome.value, "reason": reason}
        if cooldown is not None:
            ours["next_attempt_at"] = time.time() + cooldown
        connection.execute(
            "UPDATE tasks SET status = ?, claim_lock = NULL, claim_expires = NULL, "
            "worker_pid = NULL, block_kind = NULL, consecutive_failures = ?, "
            "last_failure_error = CASE WHEN ? THEN ? ELSE last_failure_error END "
            "WHERE id = ? AND current_run_id = ? AND status = 'running'",
            (
                "blocked" if gave_up else "ready",
                failures,
                count_failure,
                error[:500],
                task_id,
                run_id,
            ),
        )
        hermes_outcome = rows.HERMES_OUTCOMES[outcome]
        self._kb._end_run(
            connection,
            task_id,
            outcome=hermes_outcome,
            status=hermes_outcome,
            error=error,
            metadata={rows.MARK: ours},
        )
        payload: dict[str, Any] = {"reason": reason, "outcome": outcome.value, "by": AUTHOR}
        if gave_up:
            payload["failures"] = failures
            # A "blocked" event is what Hermes's recompute_ready honours as a block only
            # 'hermes kanban unblock' lifts; without it Hermes would put the task back
            # to ready whenever it has fewer failures than Hermes's own limit.
            sticky = {"reason": error[:500], "kind": None, "by": AUTHOR}
            self._kb._append_event(connection, task_id, "blocked", sticky, run_id=run_id)
        self._kb._append_event(
            connection, task_id, "gave_up" if gave_up else "reclaimed", payload, run_id=run_id
        )
        return True

    def running_runs(self, node: str | None = None) -> list[Run]:
        runs = self._open_runs()
        return [run for run in runs if node is None or run.node == node]

    def expired_runs(self, now: float | None = None) -> list[Run]:
        moment = time.time() if now is None else now
        return [run for run in self._open_runs() if run.lease_expires_at <= moment]

    def _open_runs(self) -> list[Run]:
        """Open runs of ``cli-*`` tasks: a Hermes profile's runs are never ours to touch."""

        def work(connection: sqlite3.Connection) -> list[Run]:
            found = connection.execute(
                "SELECT t.current_run_id, t.assignee FROM tasks t "
                "WHERE t.status = 'running' AND t.current_run_id IS NOT NULL ORDER BY 1"
            ).fetchall()
            return [
                self._run(connection, int(row[0]))
                for row in found
                if row["assignee"] and is_lane_assignee(row["assignee"])
            ]

        return self._call(work)

    # -- operator controls: Hermes's own dispatcher has them -----------------------

    def request_stop(self, task_id: str, reason: str, *, requeue: bool) -> Run:
        instead = f"Use 'hermes kanban block {task_id}'"
        raise UsageError(UNCONTROLLED.format(what="stop", instead=instead))

    def stop_request(self, run_id: int) -> StopRequest | None:
        """Never any: Hermes's schema has no place for a stop request lane-runner could read."""
        return None

    def pause(self, reason: str, by: str) -> BoardPause:
        instead = HERMES_DISPATCH.format(value="false")
        raise UsageError(UNCONTROLLED.format(what="pause", instead=instead))

    def resume(self) -> bool:
        instead = HERMES_DISPATCH.format(value="true")
        raise UsageError(UNCONTROLLED.format(what="resume", instead=instead))

    def paused(self) -> BoardPause | None:
        return None

    def close(self) -> None:
        """Nothing is held open between operations."""


@dataclass(frozen=True)
class Completion:
    """One ``complete_task`` call: the task, the run it is guarded on, what it records."""

    task_id: str
    run_id: int
    result: str
    summary: str
    metadata: dict[str, Any]

    def arguments(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "summary": self.summary,
            "metadata": self.metadata,
            "expected_run_id": self.run_id,
        }


def _placed(workspace: str | None, artifacts: list[str]) -> list[str]:
    """The result's artifacts (relative to the workspace the run worked in, which the
    task's ``workspace_path`` names) as Hermes takes them: absolute paths inside it."""
    if not workspace:
        return list(artifacts)
    return [str(Path(workspace) / artifact) for artifact in artifacts]


def _completion_metadata(
    result: dict[str, Any],
    artifacts: list[str],
    offered: dict[str, Any],
    run_id: int,
    digest: str | None,
) -> dict[str, Any]:
    """What Hermes keeps on the completed run and hands the task's children.

    The worker's changed files, tests, artifacts (absolute) and findings at the top,
    where Hermes's ``build_worker_context``, its scratch clean-up and its notifiers
    look; lane-runner's own facts (route, provider sessions, node, run and journal
    digest) under ``lane_runner``.
    """
    metadata: dict[str, Any] = {
        key: result[key] for key in ("changed_files", "tests_run", "findings") if key in result
    }
    metadata["artifacts"] = artifacts
    metadata[rows.MARK] = {**offered, "run_id": run_id, "journal_digest": digest}
    storable: dict[str, Any] = json.loads(json.dumps(metadata, default=str))
    return storable


class HermesStore:
    """The boards of one Hermes home: all non-archived ones, or those ``boards`` names."""

    def __init__(
        self,
        url: str,
        failure_limit: int = 3,
        boards: Sequence[str] = (),
        wait_budget: float = retry.DEFAULT_BUDGET,
    ) -> None:
        self._kb = hermes_home.kanban()
        self._budget = wait_budget
        self.home = hermes_home.locate(url, self._kb)
        hermes_home.pin(self.home)
        self._failure_limit = failure_limit
        self._only = tuple(boards)
        self._boards: dict[str, HermesBoard] = {}
        self._lock = threading.Lock()
        self._missing_reported: set[str] = set()
        # The boards as they are now: a change from here on wakes the first wait.
        self._watch = HermesWatch(self.home, self.board_slugs)

    def facts(self) -> str:
        """What ``doctor`` reports: the home and the hermes-agent release serving it."""
        version = hermes_home.installed_version()
        return f"{self.home} with hermes-agent {version} (kanban API checked)"

    def board_slugs(self) -> list[str]:
        try:
            listed = [str(entry["slug"]) for entry in self._kb.list_boards(include_archived=False)]
        except (OSError, ValueError) as error:
            log.error("cannot list the boards of Hermes home %s: %s", self.home, error)
            return []
        present = [s for s in listed if hermes_home.board_db(self.home, s).is_file()]
        if not self._only:
            return present
        for slug in set(self._only) - set(present) - self._missing_reported:
            self._missing_reported.add(slug)
            log.warning("hermes_boards names %r, which is not a live board of %s", slug, self.home)
        return [slug for slug in present if slug in self._only]

    def board(self, slug: str) -> HermesBoard:
        with self._lock:
            opened = self._boards.get(slug)
        if opened is not None:
            return opened
        if slug not in self.board_slugs():
            raise NotFound(
                f"no Hermes board {slug!r} served from {self.home}"
                f"{suggest.hint(slug, self.board_slugs())}; create it with "
                f"'hermes kanban boards create {slug}' (see 'hermes kanban boards list')"
                + (", and name it in the hermes_boards setting" if self._only else "")
            )
        opened = HermesBoard(
            slug, hermes_home.board_db(self.home, slug), self._kb, self._failure_limit, self._budget
        )
        with self._lock:
            return self._boards.setdefault(slug, opened)

    def create_board(self, slug: str) -> HermesBoard:
        raise UsageError(READ_ONLY.format(what="create boards", command=f"boards create {slug}"))

    def delete_board(self, slug: str, *, force: bool = False) -> int:
        raise UsageError(READ_ONLY.format(what="delete boards", command=f"boards rm {slug}"))

    def wait_for_change(self, timeout: float) -> bool:
        """True as soon as any served board's database (or the set of boards) changed."""
        return self._watch.wait(timeout)

    def close(self) -> None:
        self._watch.close()
        with self._lock:
            self._boards.clear()
