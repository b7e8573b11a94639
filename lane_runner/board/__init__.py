"""Board backends behind one contract (``board/base.py``); ``open_store`` picks one."""

from __future__ import annotations

from lane_runner import clock, extras
from lane_runner.board.base import Store
from lane_runner.board.retry import budget_for
from lane_runner.board.sqlite import SqliteStore
from lane_runner.config import Config
from lane_runner.errors import LaneRunnerError, UsageError
from lane_runner.home import Home

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
HERMES_SCHEME = "hermes://"


def open_store(cfg: Config) -> Store:
    """The embedded SQLite store under the home, or the shared one named by ``board_url``."""
    url = cfg.board_url
    budget = budget_for(cfg.heartbeat_interval)
    if not url:
        return SqliteStore(
            Home(cfg.home).boards,
            failure_limit=cfg.failure_limit,
            clock=clock.now,
            wait_budget=budget,
        )
    if url.startswith(HERMES_SCHEME):
        # Imported here: hermes-agent is an optional extra.
        from lane_runner.board.hermes.store import HermesStore

        return HermesStore(
            url, failure_limit=cfg.failure_limit, boards=cfg.hermes_boards, wait_budget=budget
        )
    if not url.startswith(POSTGRES_SCHEMES):
        raise UsageError(
            "board_url must start with postgresql:// (a shared PostgreSQL board) or "
            "hermes:// (a Hermes Agent home); unset it to use the embedded board"
        )
    try:
        # Imported here: psycopg is an optional extra that SQLite users never install.
        from lane_runner.board.postgres.store import PostgresStore
    except ImportError as error:
        if not (error.name or "").startswith("psycopg"):
            raise
        raise LaneRunnerError(
            f"board_url names a PostgreSQL board but {error.name} is not installed: "
            f"{extras.install_hint('postgres')}"
        ) from error
    # No clock: a shared board's times are the database's, never this node's.
    listen_url = cfg.board_listen_url
    if listen_url and not listen_url.startswith(POSTGRES_SCHEMES):
        raise UsageError(
            "board_listen_url must start with postgresql:// (the server's own address, "
            "not the pooler's); unset it to poll for changes"
        )
    return PostgresStore(
        url,
        failure_limit=cfg.failure_limit,
        connections=cfg.board_connections,
        wait_budget=budget,
        pooled=cfg.board_pooler == "transaction",
        listen_url=listen_url,
    )
