"""Board fixtures. ``store`` is parametrised by backend: every backend in
``BACKENDS`` runs the same contract suite. On ``hermes`` (``hermes_backend.py``) a test
marked ``not_on_hermes(why)`` is skipped, saying why."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lane_runner.board.base import Board, Store
from lane_runner.board.sqlite import SqliteStore
from tests.board import hermes_backend

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
    from lane_runner.board.postgres.store import PostgresStore

    url: str = request.getfixturevalue("postgres_database")
    return lambda: PostgresStore(url, failure_limit=FAILURE_LIMIT, clock=clock)


def _pgbouncer(request: pytest.FixtureRequest, clock: Clock) -> StoreOpener:
    """PostgreSQL through a PgBouncer in transaction mode: no LISTEN there, so stores poll."""
    from bench.pgbouncer import through
    from lane_runner.board.postgres.store import PostgresStore

    port: int = request.getfixturevalue("pgbouncer")
    url = through(request.getfixturevalue("postgres_database"), port)
    return lambda: PostgresStore(url, failure_limit=FAILURE_LIMIT, clock=clock, pooled=True)


def _hermes(request: pytest.FixtureRequest, clock: Clock) -> StoreOpener:
    from lane_runner.board.hermes.store import HermesStore

    template: Path = request.getfixturevalue("hermes_template")
    home = hermes_backend.copy_home(template, request.getfixturevalue("tmp_path"))
    # The store pins Hermes's home in this process's environment; monkeypatch undoes it.
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(home))
    url = f"hermes://{home}"
    return lambda: hermes_backend.HermesSetupStore(HermesStore(url, failure_limit=FAILURE_LIMIT))


# name -> how to open stores that share one location (several stores = several runners)
BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Clock], StoreOpener]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
    "pgbouncer": _pgbouncer,
    "hermes": _hermes,
}


def backend_of(node: pytest.Item) -> str | None:
    """The backend a collected test runs on; None for a test that opens no store."""
    callspec = getattr(node, "callspec", None)
    return None if callspec is None else callspec.params.get("open_store")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{hermes_backend.MARKER}(why): skip on the Hermes backend, saying why"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A ``not_on_hermes`` test is skipped on the Hermes backend only, with its reason."""
    for item in items:
        marker = item.get_closest_marker(hermes_backend.MARKER)
        if marker is not None and backend_of(item) == "hermes":
            item.add_marker(pytest.mark.skip(reason=f"not on Hermes: {marker.args[0]}"))


@pytest.fixture(scope="module")
def hermes_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home made by ``hermes kanban init`` per module; each test works on a copy."""
    from tests.hermes.conftest import make_home

    return make_home(tmp_path_factory.mktemp("hermes-template")).path


@pytest.fixture
def clock(request: pytest.FixtureRequest) -> Clock:
    if backend_of(request.node) == "hermes":
        return hermes_backend.WallClock()  # type: ignore[return-value]
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
