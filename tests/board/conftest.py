"""Board fixtures. ``store`` is parametrised by backend: every backend in
``BACKENDS`` runs the same contract suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lane_runner.board.base import Board, Store
from lane_runner.board.sqlite import SqliteStore

FAILURE_LIMIT = 3


class Clock:
    """A clock the test moves by hand, so leases and cooldowns are checked without sleeping."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


StoreOpener = Callable[[], Store]


def _sqlite(request: pytest.FixtureRequest, clock: Clock) -> StoreOpener:
    boards: Path = request.getfixturevalue("tmp_path") / "boards"
    return lambda: SqliteStore(boards, failure_limit=FAILURE_LIMIT, clock=clock)


def _postgres(request: pytest.FixtureRequest, clock: Clock) -> StoreOpener:
    from lane_runner.board.postgres import PostgresStore

    url: str = request.getfixturevalue("postgres_database")
    return lambda: PostgresStore(url, failure_limit=FAILURE_LIMIT, clock=clock)


# name -> how to open stores that share one location (several stores = several runners)
BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Clock], StoreOpener]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=sorted(BACKENDS))
def open_store(request: pytest.FixtureRequest, clock: Clock) -> Iterator[StoreOpener]:
    """Opens a store on the same backend and location; several stores act as several runners."""
    opener = BACKENDS[request.param](request, clock)
    opened: list[Store] = []

    def factory() -> Store:
        store = opener()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[[], Store]) -> Store:
    return open_store()


@pytest.fixture
def board(store: Store) -> Board:
    return store.create_board("main")
