"""The notification outbox of an SQL board (``board/base.py`` ``Outbox``,
docs/notifications.md): entries derived from the board's events behind a cursor,
each leased to one sender at a time.

The outbox lives in the board, not in a runner's home: every runner of a shared board
reads the one cursor and the one set of entries, so an event is derived once and sent
by whichever runner takes it, and a runner that dies leaves nothing only it knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from lane_runner import redact
from lane_runner.board.model import Notice, NoticeState
from lane_runner.board.sql.access import SqlAccess, json_text
from lane_runner.board.sql.dialect import Connection

#: An entry's stored error is cut to this (the receiver's answer, redacted by the gate).
ERROR_CHARS = 500


def _notice(row: Any, board: str) -> Notice:
    return Notice(
        id=row["id"], board=board, kind=row["kind"], task_id=row["task_id"], at=row["at"],
        data=orjson.loads(row["data"]), state=NoticeState(row["state"]),
        attempts=row["attempts"], next_at=row["next_at"], claimed_by=row["claimed_by"],
        sent_at=row["sent_at"], error=row["error"],
    )


class SqlOutbox(SqlAccess):
    """The outbox's writes change no task: no board lock, no event, no wake-up."""

    def outbox_cursor(self) -> int | None:
        def work(connection: Connection) -> int | None:
            row = self._q(
                connection, "SELECT event_id FROM outbox_cursors WHERE board = :board"
            ).fetchone()
            return None if row is None else int(row["event_id"])

        return self._read(work)

    def enqueue(self, notices: Sequence[Notice], cursor: int | None = None) -> int:
        def work(connection: Connection) -> int:
            added, now = 0, self._dialect.now(connection)  # due at once, by the board's clock
            for notice in notices:
                added += self._q(
                    connection,
                    "INSERT INTO outbox (board, id, kind, task_id, at, data, state, attempts, "
                    "next_at) VALUES (:board, :id, :kind, :task, :at, :data, 'pending', 0, :now) "
                    "ON CONFLICT (board, id) DO NOTHING",
                    id=notice.id, kind=notice.kind, task=notice.task_id, at=notice.at, now=now,
                    data=json_text(redact.document(notice.data)),
                ).rowcount
            if cursor is not None:
                self._q(
                    connection,
                    "INSERT INTO outbox_cursors (board, event_id) VALUES (:board, :cursor) "
                    "ON CONFLICT (board) DO UPDATE SET event_id = CASE WHEN "
                    "excluded.event_id > outbox_cursors.event_id THEN excluded.event_id "
                    "ELSE outbox_cursors.event_id END",
                    cursor=cursor,
                )
            return added

        return self._write(work)

    def take_notice(self, node: str, lease: float) -> Notice | None:
        def work(connection: Connection) -> Notice | None:
            now = self._dialect.now(connection)
            # Row-locked, passing over rows another sender is taking (PostgreSQL); the
            # conditions are checked again on the latest version once the lock is granted.
            row = self._q(
                connection,
                "SELECT id FROM outbox WHERE board = :board AND state = 'pending' "
                "AND next_at <= :now AND (claimed_until IS NULL OR claimed_until <= :now) "
                "ORDER BY next_at, at, id LIMIT 1" + self._dialect.lock_rows(skip_locked=True),
                now=now,
            ).fetchone()
            if row is None:
                return None
            taken = self._q(
                connection,
                "UPDATE outbox SET claimed_by = :node, claimed_until = :until "
                "WHERE board = :board AND id = :id RETURNING *",
                node=node, until=now + lease, id=row["id"],
            ).fetchone()
            return _notice(taken, self.slug)

        return self._write(work)

    def notice_sent(self, notice_id: str) -> bool:
        def work(connection: Connection) -> bool:
            cursor = self._q(
                connection,
                "UPDATE outbox SET state = 'sent', sent_at = :now, claimed_by = NULL, "
                "claimed_until = NULL, attempts = attempts + 1 "
                "WHERE board = :board AND id = :id AND state = 'pending'",
                now=self._dialect.now(connection), id=notice_id,
            )
            return bool(cursor.rowcount == 1)

        return self._write(work)

    def notice_failed(self, notice_id: str, error: str, retry_in: float | None) -> bool:
        def work(connection: Connection) -> bool:
            now = self._dialect.now(connection)
            cursor = self._q(
                connection,
                "UPDATE outbox SET state = :state, attempts = attempts + 1, "
                "next_at = coalesce(:retry_at, next_at), error = :error, claimed_by = NULL, "
                "claimed_until = NULL WHERE board = :board AND id = :id AND state = 'pending'",
                state=(NoticeState.DROPPED if retry_in is None else NoticeState.PENDING).value,
                retry_at=None if retry_in is None else now + retry_in,
                error=error[:ERROR_CHARS], id=notice_id,
            )
            return bool(cursor.rowcount == 1)

        return self._write(work)

    def release_notices(self, node: str) -> int:
        def work(connection: Connection) -> int:
            cursor = self._q(
                connection,
                "UPDATE outbox SET claimed_by = NULL, claimed_until = NULL "
                "WHERE board = :board AND claimed_by = :node AND state = 'pending'",
                node=node,
            )
            return int(cursor.rowcount)

        return self._write(work)

    def notices(self, state: NoticeState | None = None, limit: int = 100) -> list[Notice]:
        def work(connection: Connection) -> list[Notice]:
            where = "" if state is None else " AND state = :state"
            rows = self._q(
                connection,
                f"SELECT * FROM outbox WHERE board = :board{where} "
                "ORDER BY at DESC, id DESC LIMIT :limit",
                state=None if state is None else state.value, limit=limit,
            )
            return [_notice(row, self.slug) for row in rows]

        return self._read(work)

    def prune_notices(self, before: float) -> int:
        def work(connection: Connection) -> int:
            cursor = self._q(
                connection,
                "DELETE FROM outbox WHERE board = :board AND state <> 'pending' AND at < :before",
                before=before,
            )
            return int(cursor.rowcount)

        return self._write(work)
