"""Board fixtures. ``store`` is parametrised by backend so the PostgreSQL backend
joins the same contract suite by adding one entry to ``BACKENDS``."""

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


def _sqlite(tmp_path: Path, clock: Clock) -> Store:
    return SqliteStore(tmp_path / "boards", failure_limit=FAILURE_LIMIT, clock=clock)


BACKENDS: dict[str, Callable[[Path, Clock], Store]] = {"sqlite": _sqlite}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=sorted(BACKENDS))
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> Iterator[Callable[[], Store]]:
    """Opens a store on the same backend and location; several stores act as several runners."""
    opened: list[Store] = []

    def factory() -> Store:
        store = BACKENDS[request.param](tmp_path, clock)
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
