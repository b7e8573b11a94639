"""The root side never trusts the worker's files (issue 47, case 1): what the repair of an
interrupted worktree add reads (the worktree's ``.git``, the repository's ``locked``) and
what a Hermes completion attaches are the worker's to plant. A FIFO there is not waited
on, a link is not followed, a huge file is not read whole."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lane_runner import files
from lane_runner.run import interrupted


def finishes(call: Callable[[], Any], seconds: float = 20) -> Any:
    """``call()``'s value, or its exception raised here; the test fails (rather than
    hangs) when it blocks."""
    found: list[Any] = []

    def run() -> None:
        try:
            found.append(call())
        except Exception as error:  # noqa: BLE001 - handed to the test's thread
            found.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked on a file the worker planted"
    if isinstance(found[0], Exception):
        raise found[0]
    return found[0]


def test_a_fifo_as_the_worktrees_git_file_is_not_waited_on(tmp_path: Path) -> None:
    worktree = tmp_path / "task"
    worktree.mkdir()
    os.mkfifo(worktree / ".git")
    assert finishes(lambda: interrupted.unfinished(worktree)) is False
    assert (worktree / ".git").exists()  # the worker's entry is left where it is


def test_a_fifo_as_the_records_lock_is_not_waited_on(tmp_path: Path) -> None:
    record = tmp_path / "repo" / ".git" / "worktrees" / "task"
    record.mkdir(parents=True)
    os.mkfifo(record / "locked")
    worktree = tmp_path / "task"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {record}\n")
    assert finishes(lambda: interrupted.unfinished(worktree)) is False


def test_links_planted_for_the_records_are_not_followed(tmp_path: Path) -> None:
    """``locked`` a link to a file saying ``initializing`` (an unfinished add, whose
    worktree the runner would remove and make afresh); ``.git`` a link to a record."""
    record = tmp_path / "repo" / ".git" / "worktrees" / "task"
    record.mkdir(parents=True)
    (tmp_path / "lure").write_text(interrupted.INITIALIZING + "\n")
    (record / "locked").symlink_to(tmp_path / "lure")
    worktree = tmp_path / "task"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {record}\n")
    assert interrupted.unfinished(worktree) is False
    (record / "locked").unlink()
    (record / "locked").write_text(interrupted.INITIALIZING + "\n")
    assert interrupted.unfinished(worktree) is True  # the real record is still read
    (tmp_path / "elsewhere").write_text(f"gitdir: {record}\n")
    (worktree / ".git").unlink()
    (worktree / ".git").symlink_to(tmp_path / "elsewhere")
    assert interrupted.unfinished(worktree) is False


def test_a_huge_worker_file_is_read_only_to_the_bound(tmp_path: Path) -> None:
    huge = tmp_path / "huge"
    with open(huge, "wb") as file:
        file.truncate(2 << 30)  # 2 GiB, sparse
    assert len(files.read_workers(huge, 4096)) == 4097
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(FileNotFoundError):
        finishes(lambda: files.read_workers(tmp_path / "fifo", 10))
    assert (tmp_path / "fifo").exists()

