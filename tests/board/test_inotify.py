"""The embedded board's wake-up: another process's commit wakes a waiting store at once."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from lane_runner.board.inotify import DirectoryWatch
from lane_runner.board.model import NewTask
from lane_runner.board.sqlite import SqliteStore

ADD_TASK = """
import sys
from pathlib import Path
from lane_runner.board.model import NewTask
from lane_runner.board.sqlite import SqliteStore
store = SqliteStore(Path(sys.argv[1]))
store.board("b").add_task(NewTask(title="from another process"))
store.close()
"""


def test_a_write_in_the_directory_wakes_the_watch(tmp_path: Path) -> None:
    watch = DirectoryWatch(tmp_path)
    try:
        assert watch.wait(0.05) is False
        timer = threading.Timer(0.1, lambda: (tmp_path / "x.db-wal").write_bytes(b"frame"))
        timer.start()
        assert watch.wait(30) is True
        timer.join()
    finally:
        watch.close()


def test_another_processes_commit_ends_the_wait(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.create_board("b").add_task(NewTask(title="first"))
    store.wait_for_change(0)  # settle what this store has already seen
    assert store.wait_for_change(0.2) is False
    writer = subprocess.Popen([sys.executable, "-c", ADD_TASK, str(tmp_path)])
    try:
        assert store.wait_for_change(60) is True
    finally:
        writer.wait()
        store.close()
    assert len(SqliteStore(tmp_path).board("b").list_tasks()) == 2


def test_without_inotify_the_store_still_sees_changes(tmp_path: Path) -> None:
    watch = DirectoryWatch(tmp_path / "missing")  # cannot be watched: falls back to polling
    assert watch.wait(0.01) is True  # "look again", every time
    watch.close()
