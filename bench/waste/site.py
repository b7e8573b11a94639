"""The waste figure's world: a PostgreSQL server of its own (so restarting it touches no
one else's), the scripted model server as the first process of a network namespace of
its own, and per pass a runner home, a board and a repository the worker user owns,
whose daemon runs inside that namespace (so the CLIs it starts reach the scripted
server and nothing else).

The daemon reaches the board through the server's Unix socket: the namespace has no
route to the host's loopback, and a socket file is reached by its path.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench import gateway, netns
from bench.lane import REPO_ROOT, git, toml_value
from bench.scripted import ModelServer
from bench.waste.plan import TOOL_MARK
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import NewTask, Status
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.home import Home

PG_PORT = 5433
"""The own server's port: only its socket file's name, as it listens on no TCP address."""
BOARD_BACK = 60.0
"""Seconds the harness waits for its board after a PostgreSQL restart."""
UP_SAID = b"recovered: "
"""What a daemon's log says once its start's recovery is done and it claims."""
#: The real runs' clocks (tests/realrun): a node CLI takes seconds to start on a loaded
#: machine, so the stall clock is generous.
CONFIG: dict[str, object] = {
    "simulate": False,
    "concurrency": 4,
    "lease_ttl": 60.0,
    "heartbeat_interval": 0.5,
    "stall_timeout": 90.0,
    "shutdown_grace": 2.0,
    "cooldown_base": 0.3,
    "cooldown_max": 1.0,
    "failure_backoff_base": 0.0,
    "failure_limit": 100,  # a killed CLI is not the task's failure to give up on
    "breaker_threshold": 0,
    "progress_note_interval": 0,
}
#: Where the scratch goes: reachable by the worker user, and not under /tmp, where
#: codex refuses to make its helper aliases in CODEX_HOME (tests/contract/conftest.py).
SCRATCH_PARENT = Path("/var/tmp")


def cli_binary(provider: str) -> Path | None:
    """The pinned real CLI the suite's contract runs use (``LANE_CONTRACT_<NAME>``)."""
    value = os.environ.get(f"LANE_CONTRACT_{provider.upper()}")
    found = shutil.which(value) if value else None
    return Path(found) if found else None


def unavailable(providers: tuple[str, ...]) -> str | None:
    """Why the real CLIs cannot run here, or None."""
    if os.geteuid() != 0:
        return "the figure runs as root (its own PostgreSQL server runs as postgres)"
    if not os.environ.get("LANE_CONTRACT_WORKER_USER"):
        return "LANE_CONTRACT_WORKER_USER (the worker user) is not set"
    for name in providers:
        if cli_binary(name) is None:
            return f"LANE_CONTRACT_{name.upper()} is not set to a real {name} CLI"
    if not sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        return "no PostgreSQL initdb under /usr/lib/postgresql"
    return netns.unavailable()


def _postgres(name: str) -> str:
    return str(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))[-1])


@dataclass
class Postgres:
    """A PostgreSQL cluster of the figure's own, listening on its Unix socket only."""

    data: Path

    @property
    def socket_dir(self) -> Path:
        return self.data.parent / "socket"

    @property
    def options(self) -> str:
        return f"-p {PG_PORT} -k {self.socket_dir} -c listen_addresses='' -c fsync=off"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={PG_PORT}"

    def _ctl(self, *args: str) -> None:
        argv = ["runuser", "-u", "postgres", "--", _postgres("pg_ctl"), "-D", str(self.data),
                "-w", *args]
        subprocess.run(argv, capture_output=True, check=True, timeout=120)

    def init(self) -> None:
        self.data.parent.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.data.parent, "postgres", "postgres")
        subprocess.run(["runuser", "-u", "postgres", "--", _postgres("initdb"), "-D",
                        str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"],
                       capture_output=True, check=True, timeout=120)
        self.socket_dir.mkdir()
        shutil.chown(self.socket_dir, "postgres", "postgres")

    def start(self) -> None:
        self._ctl("-o", self.options, "-l", str(self.data / "server.log"), "start")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is cut, then the server is back."""
        self._ctl("-m", "fast", "-o", self.options, "-l", str(self.data / "server.log"),
                  "restart")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("-m", "fast", "stop")


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


@dataclass
class Lane:
    """One pass's home, board and repository, and its daemon in the namespace."""

    root: Path
    board_name: str
    url: str
    server: ModelServer
    daemon: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        worker = pwd.getpwnam(os.environ["LANE_CONTRACT_WORKER_USER"])
        self.uid, self.gid = worker.pw_uid, worker.pw_gid
        self.root.mkdir(parents=True)
        self.home = Home(self.root / "home")
        self.home.ensure()
        self.repo = self.root / "repo"
        self.repo.mkdir()
        git("init", "-q", "-b", "main", cwd=self.repo)
        (self.repo / "README").write_text("waste\n")
        git("add", ".", cwd=self.repo)
        git("commit", "-qm", "init", cwd=self.repo)
        self.cli_home = self.root / "cli-home"
        for name in (".codex", ".claude"):
            (self.cli_home / name).mkdir(parents=True)
        self._own([self.root, self.repo, *self.repo.rglob("*"), *self.cli_home.rglob("*"),
                   self.cli_home])
        self.store = PostgresStore(self.url)
        self.store.create_board(self.board_name)
        config = {**CONFIG, **gateway.settings(self.server.port), "board_url": self.url,
                  "worker_user": os.environ["LANE_CONTRACT_WORKER_USER"],
                  **{f"{name}_bin": str(cli_binary(name)) for name in ("codex", "claude")}}
        text = "".join(f"{key} = {toml_value(value)}\n" for key, value in config.items())
        (self.home.root / "config.toml").write_text(text)

    def _own(self, paths: list[Path]) -> None:
        for path in paths:
            os.chown(path, self.uid, self.gid, follow_symlinks=False)

    def environ(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home.root),
            "ANTHROPIC_API_KEY": "scripted-claude-key",  # claude's key, from the daemon's
            "CODEX_HOME": str(self.cli_home / ".codex"),
            "CLAUDE_CONFIG_DIR": str(self.cli_home / ".claude"),
        }

    def add(self, title: str, assignee: str) -> str:
        new = NewTask(title=title, body="Run the steps.", assignee=assignee,
                      workspace=str(self.repo))
        return self.store.board(self.board_name).add_task(new).id

    def start(self) -> None:
        """A daemon, and back once its recovery is done (it claims from then on)."""
        before = self.log().count(UP_SAID)
        argv = [sys.executable, "-m", "lane_runner.cli.main", "--home", str(self.home.root),
                "run"]
        output = (self.home.root / "daemon.log").open("ab")
        self.daemon = subprocess.Popen(self.server.join(argv), env=self.environ(),
                                       stdout=output, stderr=output, cwd=REPO_ROOT)
        wait(lambda: self.log().count(UP_SAID) > before or self._gone(), 180,
             "the daemon's recovery")
        if self._gone():
            raise RuntimeError(f"the daemon exited:\n{self.log()[-3000:].decode(errors='replace')}")

    def _gone(self) -> bool:
        return self.daemon is None or self.daemon.poll() is not None

    def kill(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGKILL)
            self.daemon.wait()

    def stop(self) -> None:
        """SIGTERM, as systemd would; then whatever is left is killed."""
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> bytes:
        path = self.home.root / "daemon.log"
        return path.read_bytes() if path.exists() else b""

    def done(self) -> int:
        """Tasks done; through a PostgreSQL restart it asks again (the harness, like the
        daemon, waits for the board to be back)."""
        deadline = time.monotonic() + BOARD_BACK
        while True:
            try:
                return self.store.board(self.board_name).counts().get(Status.DONE.value, 0)
            except BoardUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def forget_sessions(self) -> int:
        """The restart-from-scratch design: every unfinished task's lane state loses its
        CLI sessions, so the next run of it starts a new one (the daemon is down)."""
        forgotten = 0
        for path in sorted(self.home.lane_dir(self.board_name).glob("*.json")):
            document = orjson.loads(path.read_bytes())
            if not document.get("sessions"):
                continue
            document["sessions"] = {}
            temporary = path.with_name(f".{path.name}.forget")
            temporary.write_bytes(orjson.dumps(document))
            shutil.copymode(path, temporary)
            os.replace(temporary, path)
            forgotten += 1
        return forgotten

    def kill_a_tool_cli(self) -> bool:
        """kill -9 the CLI whose scripted tool is running now: the process the daemon
        started (the CLI, or the wrapper that runs it as the worker user; the daemon's
        supervision ends what it leaves)."""
        if self.daemon is None:
            return False
        for pid in _pids():
            if TOOL_MARK.encode() not in _cmdline(pid):
                continue
            cli = _child_of(pid, self.daemon.pid)
            if cli is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(cli, signal.SIGKILL)
                return True
        return False

    def close(self) -> None:
        self.stop()
        self.store.close()


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rpartition(")")[2].split()[1])


def _child_of(pid: int, ancestor: int) -> int | None:
    """The process on ``pid``'s line of parents whose parent is ``ancestor``."""
    while pid > 1:
        parent = _parent(pid)
        if parent == ancestor:
            return pid
        pid = parent
    return None


@contextlib.contextmanager
def world() -> Iterator[tuple[Path, Postgres, ModelServer]]:
    """A scratch directory, the own PostgreSQL server and the model server, removed after."""
    root = Path(tempfile.mkdtemp(prefix="lane-waste-", dir=SCRATCH_PARENT))
    root.chmod(0o755)
    postgres = Postgres(root / "pg" / "data")
    postgres.init()
    postgres.start()
    server = ModelServer(root / "model-server")
    server.root.mkdir()
    try:
        server.start()
        yield root, postgres, server
    finally:
        server.stop()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)
