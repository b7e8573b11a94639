"""Several pods on one PostgreSQL board: real daemons, separate homes, one database.

Each ``Pod`` is a home with its own node id, journal, config and clone of the
project, whose ``board_url`` points at the shared database (directly, or through
a ``Partition`` the test can cut). Tasks name their workspace as ``repo``, which
each pod's daemon resolves from its own directory: the same path on every pod,
a different disk, as in real pods. (Pods sharing one checkout would fight over
the task branches their worktrees hold.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import psycopg
import pytest

from journal import Journal
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import NewTask, Task
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.sql.board import SqlBoard
from lane_runner.clock import OFFSET_VARIABLE
from lane_runner.home import Home
from lane_runner.service.leftovers import find as find_workers
from tests.harness import Runner, assert_done_exactly_once, git

BOARD = "shared"
WORKSPACE = "repo"  # relative: each pod's daemon runs in its own directory
POD_CONFIG: dict[str, object] = {
    "simulate": True,
    "concurrency": 4,
    "lease_ttl": 3.0,
    "heartbeat_interval": 0.5,
    "stall_timeout": 30.0,
    "shutdown_grace": 1.0,
    "cooldown_base": 0.3,
    "cooldown_max": 1.0,
    "failure_backoff_base": 0.0,
    "breaker_threshold": 0,
}


class Partition:
    """A TCP forwarder in front of the server that the test can cut.

    ``cut()`` closes the listening socket (new connections are refused) and every
    forwarded connection (established ones see the peer vanish): what a pod sees
    when its network to the database goes away.
    """

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
                upstream = socket.create_connection(self._target)
            except OSError:
                return  # cut: the listening socket is closed
            with self._lock:
                if self._cut:  # accepted just as the cut happened: it never goes through
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            return  # one side closed or the partition was cut; the other pump ends too
        sink.close()

    def cut(self) -> None:
        self._server.close()
        with self._lock:
            self._cut = True
            for connection in self._open:
                with contextlib.suppress(OSError):  # already closed by its pump
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()


@dataclass
class Pod(Runner):
    """One runner's home, configured for the shared board; its daemon runs as a subprocess."""

    root: Path
    board_url: str
    control: Path
    config: dict[str, object] = field(default_factory=lambda: dict(POD_CONFIG))
    daemon: subprocess.Popen[bytes] | None = None
    clock_offset: float = 0.0  # seconds this pod's clock is off (lane_runner/clock.py)
    extra_env: dict[str, str] = field(default_factory=dict)
    """More environment for the daemon and CLI (e.g. ``LANE_RUNNER_SIM_STARTED_LOG``)."""

    def __post_init__(self) -> None:
        self.home = Home(self.root)
        self.home.ensure()
        self.node = self.home.node_id()
        self.write_config(board_url=self.board_url)

    def environ(self) -> dict[str, str]:
        return {**super().environ(), OFFSET_VARIABLE: str(self.clock_offset), **self.extra_env}

    def clone(self, origin: Path) -> None:
        git("clone", "-q", str(origin), WORKSPACE, cwd=self.root)

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        self.daemon = self.spawn(*args)
        return self.daemon

    def kill(self) -> None:
        """SIGKILL the daemon and its provider processes: the pod is gone for good."""
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGKILL)
            self.daemon.wait()
        for pid in find_workers(self.node):
            with contextlib.suppress(ProcessLookupError):  # it ended by itself meanwhile
                os.kill(pid, signal.SIGKILL)

    def journal_kinds(self) -> list[tuple[str, str, bool]]:
        """(kind, name, valid) of every journal entry of this pod."""
        return [(e.kind, e.name, e.valid) for e in Journal(self.home.lanes).entries()]

    def log_tail(self, size: int = 3000) -> str:
        path = self.root / "daemon.log"
        return path.read_text(errors="replace")[-size:] if path.exists() else ""


@dataclass
class Fleet:
    """The shared board and repository, and the pods working them."""

    root: Path
    url: str
    pods: list[Pod] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.repo = self.root / "origin"
        self.repo.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=self.repo)
        (self.repo / "README").write_text("x\n")
        git("add", ".", cwd=self.repo)
        git("commit", "-qm", "init", cwd=self.repo)
        self.control = self.root / "sim-control.json"
        self.control.write_bytes(orjson.dumps({}))
        self.store = PostgresStore(self.url)
        self.store.create_board(BOARD)

    @property
    def board(self) -> SqlBoard:
        return self.store.board(BOARD)

    def pod(self, name: str, board_url: str | None = None, clock_offset: float = 0.0) -> Pod:
        pod = Pod(self.root / name, board_url or self.url, self.control, clock_offset=clock_offset)
        pod.clone(self.repo)
        self.pods.append(pod)
        return pod

    def add(self, count: int, slow_every: int, slow: str) -> None:
        """``count`` tasks on the project; every ``slow_every``-th runs ``slow``."""
        for index in range(count):
            body = slow if index % slow_every == 0 else ""
            self.board.add_task(
                NewTask(title=f"task {index}", body=body, workspace=WORKSPACE)
            )

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``condition``; a board outage while polling just means "not yet"."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except (BoardUnavailable, psycopg.OperationalError):
                pass  # the database is restarting; ask again
            time.sleep(0.1)
        logs = "\n".join(f"--- {pod.root.name} ---\n{pod.log_tail()}" for pod in self.pods)
        raise AssertionError(f"timed out waiting for {what}\n{logs}")

    def postmaster_started(self) -> float:
        """When the server last started: changes exactly when it restarts."""
        with psycopg.connect(self.url, connect_timeout=5) as connection:
            row = connection.execute("SELECT extract(epoch FROM pg_postmaster_start_time())")
            return float(row.fetchone()[0])  # type: ignore[index]

    def tasks(self) -> list[Task]:
        return self.board.list_tasks()

    def done(self) -> int:
        return self.board.counts()["done"]

    def assert_done_exactly_once(self) -> None:
        """Every task done by exactly one run, whose committed record sits in one pod's journal."""
        assert_done_exactly_once(self.board, [pod.home for pod in self.pods], settled=False)

    def close(self) -> None:
        for pod in self.pods:
            pod.kill()
        self.store.close()


@pytest.fixture
def fleet(tmp_path: Path, postgres_database: str) -> Iterator[Fleet]:
    shared = Fleet(tmp_path, postgres_database)
    yield shared
    shared.close()


@dataclass
class OwnServer:
    """A PostgreSQL cluster of the test's own (initdb'd into a scratch directory, on a
    free port), which it may stop and start without touching the machine's server that
    every other test, in every pytest-xdist worker, is using meanwhile."""

    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run([*_AS_POSTGRES, str(_binary("pg_ctl")), "-D", str(self.data), "-w", *args],
                       capture_output=True, check=True, timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-o", options, "-l", str(self.data / "server.log"), "start")

    def stop(self) -> None:
        self._ctl("-m", "fast", "stop")


_AS_POSTGRES = ["runuser", "-u", "postgres", "--"]


def _binary(name: str) -> Path:
    """The newest installed PostgreSQL's ``name`` (Debian keeps them off PATH)."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not found:
        pytest.skip(f"no PostgreSQL {name} under /usr/lib/postgresql to make a server of our own")
    return found[-1]


@pytest.fixture
def own_server() -> Iterator[OwnServer]:
    if os.geteuid() != 0:
        pytest.skip("a server of our own is started as the postgres user, which needs root")
    scratch = Path(tempfile.mkdtemp(prefix="lane-pg-"))
    shutil.chown(scratch, "postgres", "postgres")
    data = scratch / "data"
    subprocess.run([*_AS_POSTGRES, str(_binary("initdb")), "-D", str(data), "-A", "trust",
                    "-U", "postgres", "--no-sync"], capture_output=True, check=True, timeout=120)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = OwnServer(data, port)
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # stopped by the test
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
