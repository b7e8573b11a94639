"""A real daemon in a real subprocess on a real home: the harness the end-to-end tests share.

The daemon, operator and PostgreSQL tests import from here; their conftests
expose the ``lane`` fixture.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from bench.lane import toml_value
from journal import Journal
from lane_runner.board.model import NewTask, Outcome, Run, Status, Task
from lane_runner.board.sql.board import SqlBoard
from lane_runner.board.sqlite import SqliteStore
from lane_runner.home import Home
from lane_runner.run.command import COMMAND_VARIABLE
from lane_runner.service.leftovers import find as find_workers

BOARD = "work"
FAST_CONFIG = {
    "simulate": True,
    "concurrency": 4,
    "lease_ttl": 30.0,
    "heartbeat_interval": 0.2,
    "stall_timeout": 20.0,
    "shutdown_grace": 1.0,
    "cooldown_base": 0.3,
    "cooldown_max": 1.0,
    "failure_backoff_base": 0.0,
    "breaker_threshold": 0,
}


def cli_workers(node: str) -> list[int]:
    """The node's agent CLIs and what they started, running now: the runner's own git
    commands and hooks carry the same markers (``leftovers.find``) and are left out, and
    so is a process gone before its environment was read (a short git call, most often:
    counted, it made a test think the CLI had started)."""
    return [pid for pid in find_workers(node) if _runs_cli(pid)]


def _runs_cli(pid: int) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False  # gone: not running anything
    return not any(entry.startswith(f"{COMMAND_VARIABLE}=".encode()) for entry in environ)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def assert_done_exactly_once(
    board: SqlBoard, homes: Sequence[Home], *, settled: bool = True
) -> None:
    """Every task of ``board`` done by exactly one run, whose committed journal record, in
    one of ``homes``, is the board's result; with ``settled``, no journal of ``homes``
    still holds an unfinished or untrusted entry."""
    committed: dict[str, Home] = {}
    for home in homes:
        for entry in Journal(home.lanes).entries():
            if entry.kind == "committed":
                committed[entry.name] = home
            if settled:
                assert entry.valid and entry.kind not in ("pending", "prepared", "staging"), entry
    for task in board.list_tasks():
        assert task.status is Status.DONE, task
        completed = [run for run in board.runs(task.id) if run.outcome is Outcome.COMPLETED]
        assert [run.id for run in completed] == [task.completed_run_id], task.id
        name = f"{task.id}.run-{task.completed_run_id}.terminal.committed.json"
        assert name in committed, f"no committed record for {task.id}"
        record = orjson.loads((committed[name].lane_dir(task.board) / name).read_bytes())
        assert (record["result"], record["summary"]) == (task.result, task.summary)
        kinds = [event.kind for event in board.events(task.id)]
        assert kinds.count("completed") + kinds.count("replayed") == 1, task.id


def hold_commit(held: Path, release: Path, at: str = "commit") -> dict[str, str]:
    """The environment of a daemon whose first result commit touches ``held`` (``at``
    ``commit``: once it is on the branch; ``staging``: once the worktree is staged, before
    the commit), then waits for ``release`` (``tests/holding/sitecustomize.py``)."""
    return {"PYTHONPATH": str(Path(__file__).parent / "holding"),
            "LANE_TEST_HOLD_COMMIT": f"{held}\n{release}\n{at}"}


def git_counted(tally: Path) -> dict[str, str]:
    """The environment of a daemon whose every git command appends a line (its subcommand
    and folder) to ``tally`` (``tests/holding/sitecustomize.py``): git calls per task."""
    return {"PYTHONPATH": str(Path(__file__).parent / "holding"),
            "LANE_TEST_COUNT_GIT": str(tally)}


def with_repository_hooks() -> dict[str, str]:
    """The environment of a daemon whose git runs the repository's hooks, as the runner's
    never does (``tests/holding/sitecustomize.py``): for tests of how a git call is bounded."""
    return {"PYTHONPATH": str(Path(__file__).parent / "holding"),
            "LANE_TEST_REPOSITORY_HOOKS": "1"}


class Runner:
    """What every end-to-end harness does with a runner's home: write its config, run
    its CLI and start its daemon, in subprocesses with the simulators' environment.

    Needs ``root``, ``config`` and ``control`` (the simulators' control file).
    """

    root: Path
    config: dict[str, object]
    control: Path

    def write_config(self, **changes: object) -> None:
        self.config.update(changes)
        text = "".join(f"{key} = {toml_value(value)}\n" for key, value in self.config.items())
        (self.root / "config.toml").write_text(text)

    def environ(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "IS_SANDBOX": "1",  # CI runs as root; see providers' root guard
            "LANE_RUNNER_SIM_CONTROL": str(self.control),
        }

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lane_runner.cli.main", "--home", str(self.root), *args],
            env=self.environ(),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )

    def wait(self, condition: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.05)
        log = (self.root / "daemon.log").read_text(errors="replace")[-4000:]
        raise AssertionError(
            f"timed out waiting for {what or condition}\n--- daemon log ---\n{log}"
        )

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        """``lane-runner run ARGS``, logging to ``daemon.log`` in the home."""
        log = (self.root / "daemon.log").open("ab")
        return subprocess.Popen(
            [sys.executable, "-m", "lane_runner.cli.main", "--home", str(self.root), "run", *args],
            env=self.environ(),
            stdout=log,
            stderr=log,
            cwd=self.root,
        )


@dataclass
class Lane(Runner):
    """A home with a board and a git repository, and a daemon to run against it."""

    root: Path
    config: dict[str, object] = field(default_factory=lambda: dict(FAST_CONFIG))
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    """More environment for the daemon and CLI subprocesses (e.g. ``LANE_RUNNER_SIM_GATE``)."""

    def __post_init__(self) -> None:
        self.home = Home(self.root)
        self.home.ensure()
        self.repo = self.new_repo("repo")
        self.control = self.root / "sim-control.json"
        self.set_capacity({})
        self.store = SqliteStore(self.home.boards)
        self.store.create_board(BOARD)
        self.write_config()

    def new_repo(self, name: str | Path, files: dict[str, str] | None = None) -> Path:
        """A git repository on ``main`` with ``files`` committed: ``name`` in the home's
        directory, or at ``name`` when it is an absolute path."""
        repo = self.root / name
        repo.mkdir()
        git("init", "-q", "-b", "main", cwd=repo)
        for path, text in {"README": "x\n", **(files or {})}.items():
            (repo / path).write_text(text)
        git("add", ".", cwd=repo)
        git("commit", "-qm", "init", cwd=repo)
        return repo

    @property
    def board(self) -> SqlBoard:
        return self.store.board(BOARD)

    def environ(self) -> dict[str, str]:
        return {**super().environ(), **self.extra_env}

    def set_capacity(self, scenarios: dict[str, str]) -> None:
        """Flip the simulators' behaviour from outside while the daemon runs."""
        temporary = self.control.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps(scenarios))
        temporary.replace(self.control)

    def add(
        self,
        title: str,
        body: str = "",
        assignee: str = "cli-auto",
        workspace: Path | None = None,
        **extra: object,
    ) -> Task:
        """A task working in ``workspace`` (the lane's repository when not given)."""
        new = NewTask(  # type: ignore[arg-type]
            title=title, body=body, assignee=assignee, workspace=str(workspace or self.repo),
            **extra,
        )
        return self.board.add_task(new)

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        process = self.spawn(*args)
        self.daemons.append(process)
        return process

    def tasks(self) -> list[Task]:
        return self.board.list_tasks()

    def all_done(self) -> bool:
        return all(task.status is Status.DONE for task in self.tasks())

    def runs(self, task_id: str) -> list[Run]:
        return self.board.runs(task_id)

    def lane_state(self, task_id: str) -> dict[str, object]:
        """The task's lane state file (route, attempts, sessions) as the executor saved it."""
        return orjson.loads((self.home.lane_dir(BOARD) / f"{task_id}.json").read_bytes())  # type: ignore[no-any-return]

    def node(self) -> str:
        return self.home.node_id()

    def live_workers(self) -> list[int]:
        return cli_workers(self.node())

    def stop_all(self) -> None:
        for process in self.daemons:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()


@pytest.fixture
def lane(tmp_path: Path) -> Iterator[Lane]:
    harness = Lane(tmp_path / "home")
    yield harness
    harness.stop_all()
    for pid in find_workers(harness.node()):
        os.kill(pid, signal.SIGKILL)
    harness.store.close()
