"""Board backends behind one interface (DESIGN §5); ``open_store`` picks the configured one."""

from __future__ import annotations

from lane_runner.board.base import Store
from lane_runner.board.sqlite import SqliteStore
from lane_runner.config import Config
from lane_runner.errors import LaneRunnerError
from lane_runner.home import Home


def open_store(cfg: Config) -> Store:
    """The embedded SQLite store under the home, or the shared one named by ``board_url``."""
    if cfg.board_url:
        raise LaneRunnerError(
            "PostgreSQL backend not built yet; unset board_url to use the embedded board"
        )
    return SqliteStore(Home(cfg.home).boards, failure_limit=cfg.failure_limit)
