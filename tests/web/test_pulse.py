"""One poller for every open console: listeners share its looks, see each change, and no
look happens while nobody listens."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable
from pathlib import Path

from lane_runner.board.model import NewTask
from lane_runner.board.sqlite import SqliteStore
from lane_runner.home import Home
from lane_runner.web.pulse import Boards, Pulse


class Counted(Boards):
    """``Boards`` that counts its looks and how many ran at once."""

    def __init__(self, store: SqliteStore, home: Home) -> None:
        super().__init__(store, home)
        self.looks = 0
        self.at_once = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def look(self) -> Hashable:
        with self._lock:
            self.looks += 1
            self.at_once += 1
            self.most_at_once = max(self.most_at_once, self.at_once)
        try:
            return super().look()
        finally:
            with self._lock:
                self.at_once -= 1


def test_many_listeners_share_one_poller_and_each_sees_a_change(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    home.ensure()
    store = SqliteStore(home.boards)
    board = store.create_board("work")
    boards = Counted(store, home)
    pulse = Pulse(boards, interval=0.01)

    target: list[int] = []  # the version after the change, once the test made it

    async def listener(seen: list[int | None], started: asyncio.Event) -> None:
        async for version in pulse.listen(keepalive=0.05):
            seen.append(version)
            started.set()
            heard = [v for v in seen if v is not None]
            if target and heard and heard[-1] >= target[0]:
                return

    async def scene() -> list[list[int | None]]:
        seen: list[list[int | None]] = [[] for _ in range(30)]
        events = [asyncio.Event() for _ in seen]
        tasks = [asyncio.create_task(listener(s, e)) for s, e in zip(seen, events, strict=True)]
        for event in events:
            await event.wait()
        while pulse.version == 0:  # the first look
            await asyncio.sleep(0.01)
        first = pulse.version
        await asyncio.to_thread(board.add_task, NewTask(title="moved", workspace="/w"))
        while pulse.version == first:
            await asyncio.sleep(0.01)
        target.append(pulse.version)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        await asyncio.sleep(0.05)  # the poller notices nobody listens
        return seen

    try:
        seen = asyncio.run(scene())
        looks_after = boards.looks
    finally:
        store.close()
    assert all([v for v in versions if v is not None][-1] == target[0] for versions in seen)
    assert boards.most_at_once == 1  # one poller, however many listen
    assert pulse._poller is None and pulse._listeners == 0
    assert boards.looks == looks_after
