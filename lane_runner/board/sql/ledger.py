"""The usage ledger shared through an SQL board (``board/base.py`` ``SharedLedger``,
docs/ARCHITECTURE.md §3.7): the home ledger's records, each stored once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from lane_runner.board.sql.access import SqlAccess, json_text
from lane_runner.board.sql.dialect import Connection


class SqlLedger(SqlAccess):
    """``record_usage`` and ``usage``: no task changes, so no lock and no event."""

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
                    at=record["at"], data=json_text(record),
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
