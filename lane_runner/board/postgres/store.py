"""The shared board store: boards as rows of one PostgreSQL database, opened by any number
of runners at once (the package's docstring says how they share it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lane_runner import suggest
from lane_runner.board import retry
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.postgres.database import Database, database_now
from lane_runner.board.postgres.dialect import PostgresBoardDialect
from lane_runner.board.postgres.transitions import PostgresBoard
from lane_runner.board.postgres.wakeups import Listener, Poller
from lane_runner.board.sql.board import SqlBoard
from lane_runner.board.sql.dialect import Connection as AnyConnection
from lane_runner.errors import NotFound, UsageError
from lane_runner.names import check_name

log = logging.getLogger(__name__)

Clock = Callable[[], float]
DEFAULT_CONNECTIONS = 3  # per runner: one LISTEN connection and a pool of two


class PostgresStore:
    """Boards as rows of one database; any number of runners may open it at once.

    ``connections`` bounds what this store holds on the server (or the pooler):
    one for ``LISTEN`` where it listens, the rest its pool. ``pooled``: ``url``
    goes through a pooler in transaction mode; then it listens on ``listen_url``
    (a direct address of the server) if one is given, and polls if not (as it does
    with a budget of one connection). ``server_transitions`` false runs claim,
    heartbeat and completion through ``board/sql/``, the reference, as SQLite does.
    """

    def __init__(
        self,
        url: str,
        failure_limit: int = 3,
        clock: Clock | None = None,
        connections: int = DEFAULT_CONNECTIONS,
        wait_budget: float = retry.DEFAULT_BUDGET,
        *,
        pooled: bool = False,
        listen_url: str | None = None,
        server_transitions: bool = True,
    ) -> None:
        if connections < 1:
            raise UsageError(f"board_connections must be at least 1, not {connections}")
        self._failure_limit = failure_limit
        self._clock = clock
        self._server_transitions = server_transitions
        listen_at = listen_url or (None if pooled else url)
        listens = listen_at is not None and connections >= 2
        self._db = Database(url, connections - listens, wait_budget, pooled=pooled)
        self._listener: Listener | Poller
        if listen_at is not None and listens:
            self._listener = Listener(listen_at, self._db)
            self._listener.connect()  # a failure here is retried by wait_for_change
        else:
            self._listener = Poller()
        self._boards: dict[str, SqlBoard] = {}
        self._known_slugs: list[str] | None = None
        self._lock = threading.Lock()

    def _open(self, slug: str) -> SqlBoard:
        with self._lock:
            opened = self._boards.get(slug)
            if opened is None:
                dialect = PostgresBoardDialect(slug, self._db, self._clock)
                opened = self._boards[slug] = (
                    PostgresBoard(slug, dialect, self._failure_limit, self._db.call, self._clock)
                    if self._server_transitions
                    else SqlBoard(slug, dialect, self._failure_limit)
                )
            return opened

    def create_board(self, slug: str) -> SqlBoard:
        check_name("board", slug)

        def work(connection: AnyConnection) -> bool:
            row = connection.execute(
                "INSERT INTO boards (slug, created_at) VALUES (%s, %s) "
                "ON CONFLICT (slug) DO NOTHING RETURNING slug",
                (slug, database_now(connection) if self._clock is None else self._clock()),
            ).fetchone()
            return row is not None

        if not self._db.transaction(work, write=True, notify=bool):
            raise UsageError(f"board {slug!r} already exists")
        return self._open(slug)

    def board(self, slug: str) -> SqlBoard:
        check_name("board", slug)
        with self._lock:
            opened = self._boards.get(slug)
        if opened is not None:
            return opened
        exists = self._db.transaction(
            lambda c: c.execute("SELECT 1 FROM boards WHERE slug = %s", (slug,)).fetchone(),
            write=False,
        )
        if exists is None:
            raise NotFound(
                f"no board {slug!r}{suggest.hint(slug, self.board_slugs())}; "
                f"create it with 'lane-runner board create {slug}'"
            )
        return self._open(slug)

    def delete_board(self, slug: str, *, force: bool = False) -> int:
        """The board's rows and the board itself, in one transaction (``SqlBoard.clear``:
        refused while a task runs, or unless ``force`` while one is not archived)."""
        deleted = self.board(slug).clear(
            force=force, also=("DELETE FROM boards WHERE slug = :board",)
        )
        with self._lock:
            self._boards.pop(slug, None)
        return deleted

    def board_slugs(self) -> list[str]:
        """Every board's slug; during an outage, the last list this store saw.

        The daemon and recovery walk boards one by one and handle ``BoardUnavailable``
        per board, so a store-wide outage then looks like every board being down
        rather than stopping the loop. A store that never reached the database has
        no list to fall back on and raises.
        """
        try:
            rows = self._db.transaction(
                lambda c: c.execute("SELECT slug FROM boards").fetchall(), write=False
            )
        except BoardUnavailable as error:
            if self._known_slugs is None:
                raise
            log.warning("%s; using the last known boards", error)
            return list(self._known_slugs)
        self._known_slugs = sorted(row["slug"] for row in rows)
        return list(self._known_slugs)

    def wait_for_change(self, timeout: float) -> bool:
        """Block up to ``timeout`` s; True once a board changed (``timeout`` 0: just look).

        This store's own status changes count at once; other runners' arrive as
        notifications on the listening connection.
        """
        if self._db.changed.is_set():
            self._db.changed.clear()
            if isinstance(self._listener, Poller):
                self._listener.looked()
            return True
        return self._listener.wait(timeout)

    def close(self) -> None:
        self._listener.close()
        self._db.close()
