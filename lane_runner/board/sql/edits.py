"""The operator's changes to an SQL board's tasks: add, unblock, retry, edit, archive,
delete, and clearing a board before the store removes it.

Each takes its task's row lock, then the board's before it reads another task's state
(a parent's, a child's) or writes an event.
"""

from __future__ import annotations

from collections.abc import Sequence

from lane_runner.board import rules
from lane_runner.board.model import EventKind, NewTask, Status, Task, TaskEdit
from lane_runner.board.rows import settings_column, task_from_row
from lane_runner.board.sql.access import SqlAccess
from lane_runner.board.sql.dialect import Connection
from lane_runner.errors import UsageError

#: An edit withdraws a person's word on the task: what they approved is not what it asks
#: now (docs/approvals.md).
WITHDRAW_DECISION = "decision = NULL, decided_by = NULL, decided_at = NULL"
#: A denied task unblocked or retried waits for approval again; an approval stands.
WITHDRAW_DENIAL = (
    "decided_by = CASE WHEN decision = 'denied' THEN NULL ELSE decided_by END, "
    "decided_at = CASE WHEN decision = 'denied' THEN NULL ELSE decided_at END, "
    "decision = CASE WHEN decision = 'denied' THEN NULL ELSE decision END"
)


class SqlEdits(SqlAccess):
    """Task edits: each one transition, refused (``UsageError``) where the rules say no."""

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
                "settings, created_at, updated_at) "
                "VALUES (:board, :id, :title, :body, :status, :assignee, :priority, :workspace, "
                ":max_runtime, :goal_turns, :max_retries, :max_cost_usd, :max_tokens, "
                ":settings, :now, :now)",
                id=task_id, title=new.title, body=new.body,
                status=rules.initial_status(statuses).value, assignee=new.assignee,
                priority=new.priority, workspace=new.workspace, max_runtime=new.max_runtime,
                goal_turns=new.goal_turns, max_retries=new.max_retries,
                max_cost_usd=new.max_cost_usd, max_tokens=new.max_tokens,
                settings=settings_column(new.settings), now=now,
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
            "failure_count = 0, next_attempt_at = NULL, updated_at = :now, "
            f"{WITHDRAW_DENIAL} WHERE board = :board AND id = :id",
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
                f"UPDATE tasks SET {columns}, updated_at = :now, {WITHDRAW_DECISION} "
                "WHERE board = :board AND id = :id",
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
                "events", "comments", "runs", "task_links", "tasks", "board_pauses", "usage",
                "outbox", "outbox_cursors", "approval_codes",
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
