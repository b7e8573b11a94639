"""A home with boards, a git repository and simulated CLIs, and a daemon subprocess on it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lane_runner.board.model import NewTask, Status, Task
from lane_runner.board.sqlite import SqliteStore
from lane_runner.home import Home

ASSIGNEE = "cli-codex-low"  # one provider, no router choice: the lightest path
REPO_ROOT = Path(__file__).resolve().parent.parent


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("bench\n")
    git("add", ".", cwd=path)
    git("commit", "-qm", "init", cwd=path)
    return path


def sim_environ(root: Path, started_log: Path) -> dict[str, str]:
    """What the CLIs see: the lightest scenario (plain success, zero delay).

    No PYTHONPATH: the runner hands its CLIs an allow-listed environment without one,
    so every contender's simulated CLI must import the installed package the same way
    (a PYTHONPATH entry made the floor's and Huey's CLI start about 7 ms cheaper).
    """
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "IS_SANDBOX": "1",  # the claude simulator's root guard, as the real CLI has it
        "LANE_RUNNER_SIM_SCENARIO": "success",
        "LANE_RUNNER_SIM_DELAY": "0",
        "LANE_RUNNER_SIM_STARTED_LOG": str(started_log),
    }


@dataclass
class Lane:
    root: Path
    boards: tuple[str, ...] = ("work",)
    concurrency: int = 4
    env: dict[str, str] = field(default_factory=dict)
    """More environment for the daemon and its CLIs (``LANE_RUNNER_SIM_ENDED_LOG``)."""
    daemon: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.home = Home(self.root)
        self.home.ensure()
        self.repo = make_repo(self.root / "repo")
        self.started_log = self.root / "sim-started.jsonl"
        self.fsync_file = self.root / "fsyncs.json"
        self.store = SqliteStore(self.home.boards)
        for board in self.boards:
            self.store.create_board(board)
        settings = {"simulate": "true", "concurrency": str(self.concurrency)}
        (self.root / "config.toml").write_text(
            "".join(f"{key} = {value}\n" for key, value in settings.items())
        )

    def start(self, poll: float | None = None) -> None:
        argv = [sys.executable, "-m", "bench.launch", "--fsync-count", str(self.fsync_file)]
        if poll is not None:
            argv += ["--poll", str(poll)]
        argv += ["--", "--home", str(self.root), "run"]
        log = (self.root / "daemon.log").open("ab")
        self.daemon = subprocess.Popen(
            argv,
            env={**sim_environ(self.root, self.started_log), **self.env},
            stdout=log,
            stderr=log,
            cwd=REPO_ROOT,
        )
        self.wait(lambda: "recovered" in self.log_text(), 60, "the daemon to finish recovery")

    def stop(self) -> None:
        """SIGTERM, as systemd would; the daemon writes its fsync count on the way out."""
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(60)
            except subprocess.TimeoutExpired:
                self.daemon.send_signal(signal.SIGUSR1)  # every thread's stack, into the log
                time.sleep(1)
                self.daemon.kill()
                self.daemon.wait()
        self.store.close()

    def add(self, title: str, board: str = "work") -> Task:
        new = NewTask(title=title, body="bench", assignee=ASSIGNEE, workspace=str(self.repo))
        return self.store.board(board).add_task(new)

    def done(self, board: str = "work") -> int:
        return self.store.board(board).counts().get(Status.DONE.value, 0)

    def starts(self) -> list[dict[str, float]]:
        try:
            text = self.started_log.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def fsyncs(self) -> int:
        """The daemon's fsync count, written as it exits after ``stop``."""
        try:
            return int(json.loads(self.fsync_file.read_text())["fsyncs"])
        except FileNotFoundError:
            status = None if self.daemon is None else self.daemon.returncode
            raise RuntimeError(
                f"the daemon left no fsync count (exit status {status}):\n"
                f"{self.log_text()[-12000:]}"
            ) from None

    def log_text(self) -> str:
        try:
            return (self.root / "daemon.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait(
        self, condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.005
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.daemon is not None and self.daemon.poll() is not None:
                raise RuntimeError(
                    f"daemon exited while waiting for {what}:\n{self.log_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}:\n{self.log_text()[-3000:]}")
            time.sleep(poll)


def toml_value(value: object) -> str:
    """``value`` as TOML: what a home's ``config.toml`` is written with here."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value)
