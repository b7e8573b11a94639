"""One look at the boards per interval, shared by every open console.

A console keeps a server-sent event stream open; the pages it shows change when a task
moves. Rather than each stream asking the boards, one poller asks (in a worker thread,
one short read per board: the counts and the events since the last look) and bumps a
version when anything moved; every stream waits on that version. So a hundred open
consoles cost what one does plus a wake-up each, and no console costs anything while
none is open (the poller stops with the last listener).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import suppress
from typing import Any

from lane_runner.board.base import BoardError, Store
from lane_runner.home import Home
from lane_runner.service import pause

log = logging.getLogger(__name__)

#: Seconds between looks while a console is open.
INTERVAL = 1.0
#: Seconds between keep-alive comments on a quiet stream (proxies close idle ones).
KEEPALIVE = 15.0


class Boards:
    """What the poller reads: per board, its counts, pause and the last event id seen."""

    def __init__(self, store: Store, home: Home) -> None:
        self.store = store
        self.home = home
        self.last_event: dict[str, int] = {}

    def look(self) -> Hashable:
        """A value that changes when a task moved, a board paused, a board came or went,
        or the runner paused. Each board is read in its own short transactions."""
        seen: list[Any] = []
        for slug in self.store.board_slugs():
            try:
                board = self.store.board(slug)
                newer = board.events(after_id=self.last_event.get(slug, 0))
                if newer:
                    self.last_event[slug] = newer[-1].id
                paused = board.paused()
                seen.append((slug, self.last_event.get(slug, 0), tuple(board.counts().items()),
                             paused is not None))
            except BoardError as error:
                seen.append((slug, str(error)))
        runner = pause.read(self.home.pause_file)
        return tuple(seen), runner is not None


class Pulse:
    """The version every open console waits on; the poller runs while one listens."""

    def __init__(self, boards: Boards, interval: float = INTERVAL) -> None:
        self.boards = boards
        self.interval = interval
        self.version = 0
        self._seen: Hashable = None
        self._listeners = 0
        self._changed: asyncio.Condition | None = None
        self._poller: asyncio.Task[None] | None = None

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _poll(self) -> None:
        while self._listeners:
            try:
                seen = await asyncio.to_thread(self.boards.look)
            except Exception as error:  # noqa: BLE001 - a console must not end the daemon
                log.warning("web console: reading the boards failed (%s); trying again", error)
                seen = self._seen
            if seen != self._seen:
                self._seen = seen
                self.version += 1
                async with self._condition():
                    self._condition().notify_all()
            await asyncio.sleep(self.interval)
        self._poller = None

    def _newer(self, seen: int) -> Callable[[], bool]:
        return lambda: self.version != seen

    async def listen(self, keepalive: float = KEEPALIVE) -> AsyncIterator[int | None]:
        """The version at start and after each change; None when ``keepalive`` passed
        quietly. Ends when the consumer stops (the stream closed)."""
        self._listeners += 1
        if self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        try:
            seen = self.version
            yield seen
            changed = self._condition()
            while True:
                async with changed:
                    with suppress(TimeoutError):  # then a keep-alive, said outside the lock
                        await asyncio.wait_for(changed.wait_for(self._newer(seen)), keepalive)
                if self.version == seen:
                    yield None
                    continue
                seen = self.version
                yield seen
        finally:
            self._listeners -= 1
