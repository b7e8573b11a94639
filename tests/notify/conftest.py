"""Notification tests: real boards (SQLite files, the test PostgreSQL server), real
Apprise, loopback receivers (``receivers.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lane_runner import config as configuration
from lane_runner.board.base import Store
from lane_runner.board.sqlite import SqliteStore
from tests.board.conftest import FAILURE_LIMIT, Clock
from tests.harness import lane  # noqa: F401 - the fixture, exposed to this folder
from tests.notify.receivers import HttpReceiver, http_receiver

pytest.importorskip("apprise", reason="the notify extra is not installed")

StoreOpener = Callable[[], Store]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> Iterator[StoreOpener]:
    """Stores on one location: several of them are several runners of one board."""
    if request.param == "sqlite":
        def opener() -> Store:
            return SqliteStore(tmp_path / "boards", failure_limit=FAILURE_LIMIT, clock=clock)
    else:
        from lane_runner.board.postgres.store import PostgresStore

        url: str = request.getfixturevalue("postgres_database")

        def opener() -> Store:
            return PostgresStore(url, failure_limit=FAILURE_LIMIT, clock=clock)
    opened: list[Store] = []

    def factory() -> Store:
        opened.append(opener())
        return opened[-1]

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with http_receiver() as started:
        yield started


def notify_config(tmp_path: Path, table: str, **more: str) -> configuration.Config:
    """A configuration whose ``notify`` is ``table`` (inline TOML, as the environment
    gives it)."""
    environ = {
        "LANE_RUNNER_NOTIFY": table, **{f"LANE_RUNNER_{k.upper()}": v for k, v in more.items()}
    }
    return configuration.load(tmp_path / "home", environ)
