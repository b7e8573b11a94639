"""A PgBouncer of our own, in transaction mode, in front of a PostgreSQL server (tests, bench).

Debian's ``pgbouncer`` package (``.ci/run`` installs it). Each process is started on
a free loopback port with its configuration in the caller's directory, forwards
every database name to the server of ``ADMIN_URL``, and is stopped afterwards.
PgBouncer refuses to run as root: as root it is told to switch to ``postgres`` once
it has read its files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
SERVER_POOL = 20  # server connections per database and user: what the pooler lets through


def missing() -> str | None:
    """Why no PgBouncer can be started here, or None."""
    if not os.access(PGBOUNCER, os.X_OK):
        return "pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _config(directory: Path, server: str, port: int, pool: int) -> Path:
    parts = urlsplit(server)
    user = parts.username or "postgres"
    users = directory / "users.txt"
    users.write_text(f'"{user}" ""\n')
    ini = directory / "pgbouncer.ini"
    ini.write_text(
        "[databases]\n"
        f"* = host={parts.hostname or '127.0.0.1'} port={parts.port or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {users}\n"
        "pool_mode = transaction\n"
        "max_client_conn = 2000\n"
        f"default_pool_size = {pool}\n"
        "ignore_startup_parameters = extra_float_digits\n"
    )
    return ini


@contextlib.contextmanager
def running(directory: Path, server: str, pool: int = SERVER_POOL) -> Iterator[int]:
    """A PgBouncer in front of ``server`` (a postgresql:// URL); yields its port."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [PGBOUNCER]
    if os.geteuid() == 0:
        argv += ["-u", "postgres"]
    argv.append(str(_config(directory, server, port, pool)))
    log = (directory / "pgbouncer.log").open("wb")
    process = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"pgbouncer exited ({process.returncode}): "
                    f"{(directory / 'pgbouncer.log').read_text()[-2000:]}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("pgbouncer did not listen within 30 s")
            time.sleep(0.02)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def through(url: str, port: int) -> str:
    """``url`` (to the test server) with its host and port replaced by the pooler's."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return parts._replace(netloc=f"{user}127.0.0.1:{port}").geturl()
