"""Hermes homes made by Hermes's own CLI, and a store serving one.

``hermes`` runs from the same environment as the tests (the ``hermes`` extra is
part of ``test``), with ``HOME`` and ``HERMES_HOME`` inside the test's directory
so no real Hermes installation is ever touched.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lane_runner.board.hermes.store import HermesStore
from lane_runner.home import Home
from lane_runner.service.leftovers import find as find_workers
from tests.harness import FAST_CONFIG, Runner, git

HERMES = str(Path(sys.executable).with_name("hermes"))


@dataclass
class HermesHome:
    path: Path

    def environ(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.path.parent),
            "HERMES_HOME": str(self.path),
        }

    def hermes(self, *args: str) -> str:
        done = subprocess.run(
            [HERMES, "kanban", *args],
            env=self.environ(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def create(self, title: str, *args: str, board: str = "default") -> str:
        """``hermes kanban --board BOARD create TITLE ARGS --json``: the new task's id."""
        made = self.hermes("--board", board, "create", title, *args, "--json")
        return str(json.loads(made)["id"])

    def statuses(self, task_ids: list[str]) -> dict[str, str]:
        """The tasks' statuses as Hermes's database holds them."""
        with closing(self.db()) as db:
            found = db.execute(
                f"SELECT id, status FROM tasks WHERE id IN ({','.join('?' * len(task_ids))})",
                task_ids,
            )
            return {row["id"]: row["status"] for row in found}

    def db(self, board: str = "default") -> sqlite3.Connection:
        """Hermes's own database, read directly (what Hermes itself would show)."""
        path = (
            self.path / "kanban.db"
            if board == "default"
            else (self.path / "kanban" / "boards" / board / "kanban.db")
        )
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        connection.row_factory = sqlite3.Row
        return connection


def make_home(root: Path) -> HermesHome:
    root.mkdir(parents=True, exist_ok=True)
    home = HermesHome(root / "hermes")
    home.hermes("init")
    return home


@pytest.fixture
def hermes_home(tmp_path: Path) -> HermesHome:
    return make_home(tmp_path)


@pytest.fixture
def hermes_store(hermes_home: HermesHome, monkeypatch: pytest.MonkeyPatch) -> Iterator[HermesStore]:
    # The store pins Hermes's home in this process's environment; monkeypatch undoes it.
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes_home.path))
    store = HermesStore(f"hermes://{hermes_home.path}", failure_limit=3)
    yield store
    store.close()


@dataclass
class HermesLane(Runner):
    """A lane-runner home whose board_url is a Hermes home made by ``hermes kanban init``."""

    root: Path
    hermes: HermesHome
    config: dict[str, object] = field(default_factory=lambda: dict(FAST_CONFIG))
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    """More environment for the daemon (``tests.harness.hold_commit``)."""

    def __post_init__(self) -> None:
        self.home = Home(self.root)
        self.home.ensure()
        self.control = self.root / "sim-control.json"
        self.control.write_text("{}")
        self.write_config(board_url=f"hermes://{self.hermes.path}")

    def environ(self) -> dict[str, str]:
        return {**super().environ(), **self.extra_env}

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        process = self.spawn(*args)
        self.daemons.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.daemons:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()


@pytest.fixture
def hermes_lane(tmp_path: Path) -> Iterator[HermesLane]:
    lane = HermesLane(tmp_path / "runner", make_home(tmp_path / "h"))
    yield lane
    lane.stop_all()
    for pid in find_workers(lane.home.node_id()):
        subprocess.run(["kill", "-9", str(pid)], check=False)


def repository(path: Path) -> Path:
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("x\n")
    git("add", ".", cwd=path)
    git("commit", "-qm", "init", cwd=path)
    return path
