"""Reading an SQL board: tasks, runs, events, comments and counts.

Reads take no lock; a comment (the one write here) changes no task, so it takes none
either. A read of events across tasks stops at the dialect's settled id.
"""

from __future__ import annotations

import orjson

from lane_runner.board import rules
from lane_runner.board.model import Comment, Event, Run, Status, Task
from lane_runner.board.rows import run_from_row, task_from_row
from lane_runner.board.sql.access import SqlAccess
from lane_runner.board.sql.dialect import Connection


class SqlReads(SqlAccess):
    """The reads of the board contract, and comments."""

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
