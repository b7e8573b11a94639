"""The console's tests: the application in process over a real SQLite file and a real
PostgreSQL database (``store``), and a live daemon serving it (``tests/harness.py``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.board import open_store
from lane_runner.board.base import Board, Store
from lane_runner.board.model import NewTask
from lane_runner.config import Config
from lane_runner.home import Home
from tests.harness import git, lane  # noqa: F401 - the fixture, exposed to this folder

pytest.importorskip("starlette", reason="the web extra is not installed")

with warnings.catch_warnings():  # starlette asks for httpx2, which is not packaged here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402 - after the skip

from lane_runner.web import auth  # noqa: E402
from lane_runner.web.app import build  # noqa: E402

TOKEN = "a-console-token-for-tests"
BOARD = "work"


@dataclass
class Site:
    """A board store with one board and a repository, and the console over it."""

    cfg: Config
    store: Store
    repo: Path

    @property
    def board(self) -> Board:
        return self.store.board(BOARD)

    @property
    def home(self) -> Home:
        return Home(self.cfg.home)

    def add(self, title: str, **fields: object) -> str:
        task = self.board.add_task(
            NewTask(title=title, workspace=str(self.repo), **fields)  # type: ignore[arg-type]
        )
        return task.id

    def client(self, token: str | None = TOKEN, loopback_only: bool = True) -> TestClient:
        app = build(self.cfg, self.store, auth.Gate(token, loopback_only))
        return TestClient(app, follow_redirects=False)


@pytest.fixture(params=["sqlite", "postgres"])
def site(
    request: pytest.FixtureRequest, tmp_path: Path,
    new_postgres_database: Callable[[], str],
) -> Iterator[Site]:
    environ = {}
    if request.param == "postgres":
        environ["LANE_RUNNER_BOARD_URL"] = new_postgres_database()
    root = tmp_path / "home"
    Home(root).ensure()
    cfg = config.load(root, environ=environ)
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=repo)
    store = open_store(cfg)
    store.create_board(BOARD)
    yield Site(cfg, store, repo)
    store.close()
