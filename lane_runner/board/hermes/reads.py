"""Reading a Hermes board: tasks, runs, events and comments, as the board contract's records.

A comment is the one write here: Hermes's own ``add_comment``, which changes no task.
"""

from __future__ import annotations

import sqlite3

from lane_runner.board import rules
from lane_runner.board.hermes import rows
from lane_runner.board.hermes.access import HermesAccess
from lane_runner.board.model import Comment, Event, Run, Status, Task


class HermesReads(HermesAccess):
    """The reads of the board contract (and comments), one short connection each."""

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
