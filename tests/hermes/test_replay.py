"""Exactly once across a crash on a Hermes board (docs/ARCHITECTURE.md §4.1, §5).

A process claims a task, journals its result and dies (``os._exit``) either just
after Hermes committed the completion or just before. ``lane-runner recover`` on
the same home then replays the journal against Hermes: the first case is a
duplicate it recognises by run and digest, the second a run Hermes has since
given to someone else, which must not be completed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from journal import Journal
from lane_runner.board.hermes.store import HermesStore
from lane_runner.home import Home
from tests.harness import FAST_CONFIG, toml_value
from tests.hermes.conftest import HermesHome

CRASH = r"""
import os, sys
from pathlib import Path
from journal import Journal
from lane_runner.board.hermes.store import HermesStore
from lane_runner.home import Home

url, root, where = sys.argv[1:]
home = Home(Path(root))
result = {"status": "completed", "summary": "fixed", "changed_files": ["a.py"],
          "tests_run": [], "artifacts": [], "findings": [], "blockers": []}
board = HermesStore(url).board("default")
claim = board.claim(home.node_id(), 1, "")
journal = Journal(home.lanes)
journal.write_pending("default", claim.task.id, claim.run.id, result, "fixed", {"by": "x"})

def commit(record):
    if where == "before":
        os._exit(9)
    board.complete(record.run_id, record.result, record.summary,
                   {**record.metadata, "journal_digest": record.digest})
    os._exit(9)

journal.finalize("default", claim.task.id, claim.run.id, commit)
"""


def runner_home(root: Path, hermes: HermesHome) -> Path:
    Home(root).ensure()
    config = {**FAST_CONFIG, "board_url": f"hermes://{hermes.path}"}
    (root / "config.toml").write_text(
        "".join(f"{k} = {toml_value(v)}\n" for k, v in config.items())
    )
    return root


def crash(root: Path, hermes: HermesHome, where: str) -> None:
    died = subprocess.run(
        [sys.executable, "-c", CRASH, f"hermes://{hermes.path}", str(root), where],
        env={**hermes.environ(), "HOME": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == 9, died.stderr


def recover(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", "--home", str(root), "recover", "--json"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def journal_kinds(root: Path) -> list[str]:
    return sorted(entry.kind for entry in Journal(Home(root).lanes).entries())


def test_a_completion_hermes_committed_before_the_crash_is_replayed_as_a_duplicate(
    hermes_home: HermesHome, tmp_path: Path
) -> None:
    task_id = hermes_home.create("t", "--assignee", "cli-auto")
    root = runner_home(tmp_path / "runner", hermes_home)
    crash(root, hermes_home, "after")
    assert journal_kinds(root) == ["pending", "prepared"]
    done = recover(root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert journal_kinds(root) == ["committed"]
    db = hermes_home.db()
    runs = db.execute("SELECT outcome FROM task_runs WHERE task_id = ?", (task_id,)).fetchall()
    assert [r[0] for r in runs] == ["completed"]
    events = db.execute(
        "SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'completed'", (task_id,)
    ).fetchone()[0]
    assert events == 1
    assert db.execute("SELECT status FROM tasks WHERE id = ?", (task_id,)).fetchone()[0] == "done"


def test_a_run_hermes_released_after_the_crash_is_never_completed(
    hermes_home: HermesHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_cli import kanban_db

    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes_home.path))  # the store pins it

    task_id = hermes_home.create("t", "--assignee", "cli-auto")
    root = runner_home(tmp_path / "runner", hermes_home)
    crash(root, hermes_home, "before")
    assert journal_kinds(root) == ["pending", "prepared"]
    time.sleep(2.1)  # the dead runner's one-second lease runs out
    connection = kanban_db.connect(db_path=hermes_home.path / "kanban.db")
    try:
        assert kanban_db.release_stale_claims(connection) == 1  # Hermes's own sweep
    finally:
        connection.close()
    other = HermesStore(f"hermes://{hermes_home.path}").board("default").claim("node-b", 600, "")
    assert other is not None and other.task.id == task_id
    done = recover(root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert journal_kinds(root) == ["conflict"]  # the result kept whole, the board unchanged
    db = hermes_home.db()
    task = db.execute(
        "SELECT status, current_run_id FROM tasks WHERE id = ?", (task_id,)
    ).fetchone()
    assert tuple(task) == ("running", other.run.id)
    completed = db.execute(
        "SELECT COUNT(*) FROM task_runs WHERE task_id = ? AND outcome = 'completed'", (task_id,)
    ).fetchone()[0]
    assert completed == 0
