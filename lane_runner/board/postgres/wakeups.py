"""Wake-ups from a PostgreSQL board: a ``LISTEN`` connection, or a poll where nobody can
listen (behind a pooler in transaction mode).

Every transaction that changes a task's status sends ``NOTIFY`` on one channel; the
payload names the sending store, so a store ignores its own notifications.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from lane_runner.board.postgres.database import CHANNEL, CONNECT_TIMEOUT, Database

log = logging.getLogger(__name__)

LISTEN_BACKOFF = (0.5, 1.0, 2.0, 5.0)  # reconnect delays of the listening connection
POLL_INTERVAL = 1.0  # seconds between looks at the boards where nobody can LISTEN


class Listener:
    """The dedicated ``LISTEN`` connection behind ``wait_for_change``.

    Used from one thread (the daemon's loop). While it is down it reconnects with
    a backoff, and a reconnection reports a change: notifications sent while
    nobody listened are lost, so the caller should look at the boards once.
    """

    def __init__(self, url: str, database: Database) -> None:
        self._url = url
        self._database = database
        self._connection: psycopg.Connection[Any] | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._closed = False  # closed on purpose (the store is closing): no more listening

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._closed:
            if self._connection is None and time.monotonic() >= self._retry_at and self.connect():
                return True
            if self._connection is not None and self._heard_others(
                max(0.0, deadline - time.monotonic())
            ):
                return True
            if time.monotonic() >= deadline:
                return False
            if self._connection is None:
                time.sleep(max(0.0, min(deadline, self._retry_at) - time.monotonic()))
        return False

    def _heard_others(self, timeout: float) -> bool:
        """True when another store's notification arrived within ``timeout`` (or we went deaf)."""
        assert self._connection is not None
        try:
            for notification in self._connection.notifies(timeout=timeout, stop_after=1):
                if notification.payload != self._database.token:
                    return True
        except psycopg.Error as error:
            if self._closed:  # a clean stop closed it under the waiting thread
                log.debug("board change listener closed: %s", error)
                return False
            log.warning("board change listener lost (%s); reconnecting", error)
            self._drop()
            return True
        return False

    def connect(self) -> bool:
        """Open and LISTEN; on failure schedule the next attempt (backoff) and say False."""
        try:
            self._connection = psycopg.connect(
                self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            )
            self._connection.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as error:
            self._drop()
            delay = LISTEN_BACKOFF[min(self._failures, len(LISTEN_BACKOFF) - 1)]
            self._failures += 1
            self._retry_at = time.monotonic() + delay
            log.warning(
                "cannot listen for board changes at %s (%s); retrying in %.1fs",
                self._database.where,
                str(error).strip(),
                delay,
            )
            return False
        self._failures = 0
        return True

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None

    def close(self) -> None:
        self._closed = True
        self._drop()


class Poller:
    """Wake-ups where nobody can LISTEN: a look at the boards every ``POLL_INTERVAL``.

    A pooler in transaction mode hands each transaction whichever server session is
    free, so a ``LISTEN`` there hears nothing reliably. Without a direct address
    to listen on, ``wait_for_change`` reports a change once per interval, so the
    daemon looks again: a change waits at most that long, never forever.
    """

    def __init__(self, interval: float = POLL_INTERVAL) -> None:
        self._interval = interval
        self._due = time.monotonic() + interval

    def looked(self) -> None:
        """The caller is looking at the boards now: the next look is due an interval later."""
        self._due = time.monotonic() + self._interval

    def wait(self, timeout: float) -> bool:
        wait = self._due - time.monotonic()
        if wait > timeout:
            time.sleep(max(0.0, timeout))
            return False
        time.sleep(max(0.0, wait))
        self.looked()
        return True

    def close(self) -> None:
        """Nothing held."""


