"""A fresh PostgreSQL database per figure, on the machine's server or LANE_RUNNER_TEST_POSTGRES.

The figures that need PostgreSQL report themselves skipped, with the reason, when
no server answers: the rest of the benchmark still runs.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

import psycopg

ADMIN_URL = os.environ.get(
    "LANE_RUNNER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def unavailable() -> str | None:
    """Why no database can be made here, or None when the server answers."""
    try:
        psycopg.connect(ADMIN_URL, connect_timeout=3).close()
    except psycopg.OperationalError as error:
        return f"no PostgreSQL server at {ADMIN_URL} ({str(error).strip()})"
    return None


@contextlib.contextmanager
def database(prefix: str) -> Iterator[str]:
    """The URL of a new, empty database, dropped afterwards."""
    name = f"{prefix}_{secrets.token_hex(5)}"
    with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{ADMIN_URL.rpartition('/')[0]}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
