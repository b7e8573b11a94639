"""The campaign's world: one PostgreSQL board, one shared git repository with a bare
remote to push to, and two runner homes (each its own node id), whose daemons run as
subprocesses the campaign kills -9 and starts again.

Every edge records itself to a file under ``logs/``, written by the process that did
it (so a kill cannot lose a record of something that happened):

- ``cli.jsonl``: each simulated CLI run at its start, with its working directory (the
  task's worktree): ``LANE_RUNNER_SIM_STARTED_LOG``, which the simulators honour;
- ``commits.log``: the repository's ``post-commit`` hook, for each commit carrying a
  ``Lane-Task`` trailer (a runner-made result commit); it then sleeps a little, so
  kills land between the commit and the runner's pending record;
- ``pushes.log``: the repository's ``pre-push`` hook, for each push of a task's branch;
- ``after_done.log``: the board's ``after_done`` hook, which then sleeps a little too.

Each follow-up record carries ``LANE_DELIVERY_ID`` when the runner gives one.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.lane import git, make_repo, toml_value
from lane_runner.board.model import NewTask
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.sql.board import SqlBoard
from lane_runner.home import Home
from lane_runner.service.leftovers import find as find_workers

BOARD = "campaign"
HOOK_PAUSE = 0.15
"""Seconds the post-commit and after_done hooks sleep after recording: the windows
between a result's commit and its pending record, and inside its follow-ups."""
CONFIG: dict[str, object] = {
    "simulate": True,
    "concurrency": 2,
    "lease_ttl": 30.0,  # a killed daemon is started again: its own start takes its runs back
    "heartbeat_interval": 0.5,
    "stall_timeout": 30.0,
    "shutdown_grace": 1.0,
    "cooldown_base": 0.3,
    "cooldown_max": 1.0,
    "failure_backoff_base": 0.0,
    "failure_limit": 100,  # a CLI killed under a task is not the task's failure to give up on
    "breaker_threshold": 0,
    "gc_interval": 1.0,  # the cleanup pass runs the follow-ups a replayed result missed
    "push": "on_done",
}
POST_COMMIT = """#!/bin/sh
case "$(git log -1 --format=%B)" in *"Lane-Task:"*) ;; *) exit 0 ;; esac
printf '%s %s %s\\n' "$(date +%s.%N)" "$(git rev-parse HEAD)" "${{LANE_DELIVERY_ID:-}}" >> {log}
sleep {pause}
"""
PRE_PUSH = """#!/bin/sh
printf '%s %s %s\\n' "$(date +%s.%N)" "$(basename "$PWD")" "${{LANE_DELIVERY_ID:-}}" >> {log}
cat > /dev/null
"""
AFTER_DONE = (
    "printf '%s %s %s\\n' \"$(date +%s.%N)\" \"$LANE_TASK_ID\" \"${{LANE_DELIVERY_ID:-}}\" "
    ">> {log}; sleep {pause}"
)
UP_SAID = b"recovered: "
"""What a daemon's log says once its start's recovery is done and it claims."""
STANDBY = """
import importlib, json, os, pkgutil, sys
import lane_runner
from lane_runner.cli import main as cli
for module in pkgutil.walk_packages(lane_runner.__path__, "lane_runner."):
    if ".simulators" not in module.name:
        importlib.import_module(module.name)
argv = json.loads(sys.stdin.readline() or "null")
if argv is None:
    sys.exit(0)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
sys.exit(cli.main(argv))
"""
"""A runner command waiting to be told its arguments, its modules imported already.

On this 2-core machine, shared with the other tests, importing the runner takes a few
seconds; a restart that paid it each time would spend the campaign's minutes on
imports, not on recoveries. A standby is a fresh process that has done nothing but
import: told ``["--home", H, "run"]`` it is the daemon's start (recovery included),
exactly as if just spawned; told nothing (its stdin closed) it ends."""
STANDBYS = 2
"""Standbys kept per home: a restart after ``recover`` takes two."""


@dataclass(frozen=True)
class Logs:
    """Where the edges record themselves (the module's docstring)."""

    root: Path

    @property
    def cli(self) -> Path:
        return self.root / "cli.jsonl"

    @property
    def commits(self) -> Path:
        return self.root / "commits.log"

    @property
    def pushes(self) -> Path:
        return self.root / "pushes.log"

    @property
    def after_done(self) -> Path:
        return self.root / "after_done.log"


@dataclass
class Runner:
    """One home and its daemon subprocess, started and killed as the schedule says."""

    root: Path
    environ: dict[str, str]
    daemon: subprocess.Popen[bytes] | None = None
    spawned: float = 0.0
    log_from: int = 0
    starts: int = 0
    standbys: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.home = Home(self.root)
        self.home.ensure()
        self.node = self.home.node_id()

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    def write_config(self, config: dict[str, object]) -> None:
        text = "".join(f"{key} = {toml_value(value)}\n" for key, value in config.items())
        (self.root / "config.toml").write_text(text)

    def _standby(self) -> subprocess.Popen[bytes]:
        """A waiting runner command (``STANDBY``): the oldest, new ones in its place."""
        taken = self.standbys.pop(0) if self.standbys else self._spawn_standby()
        while len(self.standbys) < STANDBYS:
            self.standbys.append(self._spawn_standby())
        return taken

    def _spawn_standby(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-c", STANDBY], env=self.environ, stdin=subprocess.PIPE,
                stdout=log, stderr=log, cwd=self.root,
            )

    def _told(self, *args: str) -> subprocess.Popen[bytes]:
        process = self._standby()
        assert process.stdin is not None
        process.stdin.write(json.dumps(["--home", str(self.root), *args]).encode() + b"\n")
        process.stdin.close()
        return process

    def start(self) -> None:
        self.log_from = self.log.stat().st_size if self.log.exists() else 0
        self.daemon = self._told("run")
        self.spawned = time.monotonic()
        self.starts += 1

    def up(self) -> bool:
        """Whether the daemon started last has recovered and claims (its log says so)."""
        if not self.log.exists():
            return False
        with self.log.open("rb") as log:
            log.seek(self.log_from)
            return UP_SAID in log.read()

    def alive(self) -> bool:
        return self.daemon is not None and self.daemon.poll() is None

    def kill(self) -> None:
        """kill -9 the daemon alone: its CLIs and hooks live on, as after a real crash."""
        if self.daemon is not None:
            if self.daemon.poll() is None:
                self.daemon.send_signal(signal.SIGKILL)
            self.daemon.wait()

    def recover(self) -> int:
        """``lane-runner recover``, as an operator runs it before starting a crashed runner;
        its exit status (what it said goes to the daemon's log)."""
        return self._told("recover").wait(timeout=120)

    def dismiss(self) -> None:
        """End the standbys (told nothing, each ends)."""
        for process in self.standbys:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()  # still importing on a starved machine: it had done nothing
                process.wait()
        self.standbys.clear()

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, then wait up to ``timeout``; its exit status, or None when it would
        not stop (then it is killed, so nothing outlives the campaign)."""
        if self.daemon is None:
            return 0
        if self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
        try:
            return self.daemon.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def cli_pids(self) -> list[int]:
        """The simulated CLIs this home runs now: its workers (their environment names the
        node) whose command runs a simulator. Hooks and git are workers too, but a hook
        killed alone is a failed hook, reported and not run again (docs/delivery.md): a
        kill meant for a CLI that found an ``after_done`` hook counted it missing."""
        return [pid for pid in find_workers(self.node, home=self.root) if _simulator(pid)]

    def log_tail(self, size: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""


@dataclass
class Site:
    """The board, the repository, the remote and the two runners."""

    root: Path
    url: str
    homes: int = 2
    runners: list[Runner] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.logs = Logs(self.root / "logs")
        self.logs.root.mkdir(parents=True)
        self.repo = make_repo(self.root / "origin")
        git("config", "gc.auto", "0", cwd=self.repo)  # every commit object stays countable
        self.remote = self.root / "remote.git"
        git("init", "-q", "--bare", str(self.remote), cwd=self.root)
        git("remote", "add", "origin", str(self.remote), cwd=self.repo)
        self._hook("post-commit", POST_COMMIT.format(
            log=shlex.quote(str(self.logs.commits)), pause=HOOK_PAUSE))
        self._hook("pre-push", PRE_PUSH.format(log=shlex.quote(str(self.logs.pushes))))
        self.store = PostgresStore(self.url)
        self.store.create_board(BOARD)
        after_done = AFTER_DONE.format(log=shlex.quote(str(self.logs.after_done)), pause=HOOK_PAUSE)
        config = {**CONFIG, "board_url": self.url, "hooks": {"*": {"after_done": after_done}}}
        for index in range(self.homes):
            runner = Runner(self.root / f"home-{'ab'[index]}", self.environ(index))
            runner.write_config(config)
            self.runners.append(runner)

    def _hook(self, name: str, script: str) -> None:
        path = self.repo / ".git" / "hooks" / name
        path.write_text(script)
        path.chmod(0o755)

    def environ(self, index: int) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root / f"home-{'ab'[index]}"),
            "IS_SANDBOX": "1",  # the claude simulator's root guard, as the real CLI has it
            "LANE_RUNNER_SIM_STARTED_LOG": str(self.logs.cli),
        }

    @property
    def board(self) -> SqlBoard:
        return self.store.board(BOARD)

    def add_task(self, index: int, body: str) -> None:
        self.board.add_task(NewTask(title=f"task {index}", body=body, workspace=str(self.repo)))

    def close(self) -> None:
        for runner in self.runners:
            runner.kill()
            runner.dismiss()
        self.store.close()


def _simulator(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False  # gone meanwhile: nothing to kill
    return b"lane_runner.providers.simulators." in command
