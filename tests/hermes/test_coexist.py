"""The daemon and Hermes's own processes on one board, for minutes, as a user would have it.

While the daemon serves a Hermes home, Hermes's CLI files, lists, shows, comments on,
blocks and completes tasks and runs its dispatcher, over and over. Every one of those
commands opens the database and closes it again; none may take the daemon's board
away (docs/ARCHITECTURE.md §5, coexistence).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from lane_runner.board.hermes import home as hermes_home
from lane_runner.board.hermes.store import HermesStore
from tests.hermes.conftest import HermesHome, HermesLane

SOAK_SECONDS = 120.0
#: An assignee no Hermes profile and no lane answers to: Hermes's CLI does those tasks.
HERMES_SIDE = "reviewer"


def deleted_handles(pid: int | str) -> list[str]:
    """The board files the process holds open although they are gone from the directory."""
    fds = Path(f"/proc/{pid}/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue  # closed meanwhile
        if "kanban.db" in target and target.endswith("(deleted)"):
            found.append(target)
    return found


def holds_a_lock(pid: int, database: Path) -> bool:
    """Whether the process holds any POSIX lock on the database file (``/proc/locks``)."""
    inode = database.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if fields[4] == str(pid) and fields[5].endswith(f":{inode}"):
            return True
    return False


def test_a_write_through_hermes_leaves_this_process_holding_its_lock(
    hermes_home: HermesHome, hermes_store: HermesStore
) -> None:
    """Hermes's own checks used to open and close the file: the process's locks went with it."""
    database = hermes_home.path / "kanban.db"
    hermes_store.wait_for_change(0)  # the watch has the board open
    assert holds_a_lock(os.getpid(), database)
    hermes_home.create("t", "--assignee", "cli-auto")
    claimed = hermes_store.board("default").claim("node", 60, "cli-auto")  # Hermes's write_txn
    assert claimed is not None
    assert holds_a_lock(os.getpid(), database)
    hermes_home.hermes("ls")  # a Hermes CLI closing its connection next to ours
    assert deleted_handles("self") == []
    assert hermes_store.board("default").heartbeat(claimed.run.id, 60)


def test_hermes_s_file_checks_still_refuse_a_foreign_file_and_a_short_one(tmp_path: Path) -> None:
    kanban = hermes_home.kanban()
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"\x16\x03\x01 not a database at all" * 8)
    with pytest.raises(sqlite3.DatabaseError, match="invalid SQLite header"):
        kanban._validate_sqlite_header(foreign)
    short = tmp_path / "short.db"
    with closing(sqlite3.connect(short)) as writer:
        writer.execute("CREATE TABLE t (x)")
        writer.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 100)
        writer.commit()
    page_size = 4096
    with short.open("r+b") as cut:
        cut.truncate(short.stat().st_size - page_size)
    torn = pytest.raises(sqlite3.DatabaseError, match="torn")
    with closing(sqlite3.connect(short)) as reader, torn:
        kanban._check_file_length_invariant(reader)


def test_a_hermes_board_made_again_under_the_store_is_watched_on_its_new_file(
    hermes_home: HermesHome, hermes_store: HermesStore
) -> None:
    hermes_home.hermes("boards", "create", "other")
    assert hermes_store.board_slugs() == ["default", "other"]
    hermes_store.wait_for_change(0)  # the watch reads both boards now
    shutil.rmtree(hermes_home.path / "kanban" / "boards" / "other")
    hermes_home.hermes("boards", "create", "other")
    task_id = hermes_home.create("on the new board", "--assignee", "cli-auto", board="other")
    assert hermes_store.wait_for_change(0)
    assert deleted_handles("self") == []
    claimed = hermes_store.board("other").claim("node", 60, "cli-auto")
    assert claimed is not None and claimed.task.id == task_id


def test_the_daemon_and_hermes_s_cli_share_a_board_for_minutes(hermes_lane: HermesLane) -> None:
    hermes = hermes_lane.hermes
    database = hermes.path / "kanban.db"
    daemon = hermes_lane.start()
    ours: list[str] = []
    theirs: list[str] = []
    samples: list[tuple[list[str], bool]] = []
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < SOAK_SECONDS:
        ours.append(hermes.create(f"lane task {n}", "--assignee", "cli-auto", "--body", "do it"))
        other = hermes.create(f"hermes task {n}", "--assignee", HERMES_SIDE)
        theirs.append(other)
        hermes.hermes("ls")
        hermes.hermes("show", ours[-1])
        hermes.hermes("comment", other, f"looked at it ({n})")
        if n % 2:
            hermes.hermes("block", other, "waiting for a human")
        else:
            hermes.hermes("complete", other, "--result", "done by hand")
        hermes.hermes("dispatch")
        assert daemon.poll() is None, "the daemon stopped"
        samples.append((deleted_handles(daemon.pid), holds_a_lock(daemon.pid, database)))
        n += 1

    hermes_lane.wait(lambda: set(hermes.statuses(ours).values()) == {"done"}, timeout=120)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0

    log = (hermes_lane.root / "daemon.log").read_text(errors="replace")
    assert "disk I/O" not in log and "malformed" not in log, log[-4000:]
    assert [s for s in samples if s[0]] == [], "the daemon held deleted board files"
    assert all(locked for _, locked in samples), "the daemon held no lock on its board"
    with closing(hermes.db()) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for task_id in ours:
            completed = db.execute(
                "SELECT COUNT(*) FROM task_runs WHERE task_id = ? AND outcome = 'completed'",
                (task_id,),
            ).fetchone()[0]
            events = db.execute(
                "SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'completed'",
                (task_id,),
            ).fetchone()[0]
            assert (completed, events) == (1, 1), task_id
    hermes_side = hermes.statuses(theirs)
    assert [hermes_side[t] for t in theirs] == [
        "blocked" if i % 2 else "done" for i in range(len(theirs))
    ]

