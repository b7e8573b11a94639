"""Hermes homes made by Hermes's own CLI, and a store serving one.

``hermes`` runs from the same environment as the tests (the ``hermes`` extra is
part of ``test``), with ``HOME`` and ``HERMES_HOME`` inside the test's directory
so no real Hermes installation is ever touched.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lane_runner.board.hermes import HermesStore

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

    def create(self, title: str, *args: str) -> str:
        """``hermes kanban create TITLE ARGS --json``: the new task's id."""
        return str(json.loads(self.hermes("create", title, *args, "--json"))["id"])

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
