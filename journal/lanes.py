"""Board directories under the lanes root: found, created and opened without following links.

A board directory is ``<lanes_root>/<board>`` (0700). Every journal operation
works through an open descriptor of it, so a directory swapped for a symlink
mid-operation cannot redirect writes or removals elsewhere.
"""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from journal import names
from journal.fs import FS


@dataclass(frozen=True)
class BoardDir:
    """An open board directory: the filesystem, its descriptor, its slug and path."""

    fs: FS
    fd: int
    board: str
    path: Path


def check_board(board: str) -> str:
    if not names.is_slug(board):
        raise ValueError(f"invalid board slug {board!r}")
    return board


@contextlib.contextmanager
def open_board(fs: FS, lanes_root: Path, board: str, *, create: bool) -> Iterator[BoardDir]:
    """The board directory, created 0700 first when ``create``; FileNotFoundError if absent."""
    check_board(board)
    if create:
        lanes_root.mkdir(mode=0o700, parents=True, exist_ok=True)
    root_fd = fs.open_root(lanes_root)
    try:
        if create:
            _ensure_dir(fs, root_fd, board)
        board_fd = fs.open_dir(root_fd, board)
    finally:
        fs.close(root_fd)
    try:
        yield BoardDir(fs, board_fd, board, lanes_root / board)
    finally:
        fs.close(board_fd)


def _ensure_dir(fs: FS, root_fd: int, board: str) -> None:
    try:
        fs.mkdir(root_fd, board)
    except FileExistsError:
        return
    fs.fsync(root_fd)


def boards(fs: FS, lanes_root: Path) -> tuple[list[str], list[str]]:
    """(board slugs that are real directories, other names that were skipped)."""
    try:
        root_fd = fs.open_root(lanes_root)
    except FileNotFoundError:
        return [], []
    found: list[str] = []
    skipped: list[str] = []
    try:
        for name in sorted(fs.listdir(root_fd)):
            is_dir = stat.S_ISDIR(_lstat_mode(fs, root_fd, name))
            (found if is_dir and names.is_slug(name) else skipped).append(name)
    finally:
        fs.close(root_fd)
    return found, skipped


def _lstat_mode(fs: FS, root_fd: int, name: str) -> int:
    try:
        return fs.lstat(root_fd, name).st_mode
    except FileNotFoundError:
        return 0


def mtime_order(fs: FS, dir_fd: int, entry_names: list[str]) -> list[str]:
    """Oldest first (then by name), so the first durably prepared result is replayed first."""

    def key(name: str) -> tuple[int, str]:
        try:
            return fs.lstat(dir_fd, name).st_mtime_ns, name
        except FileNotFoundError:
            return 2**63, name

    return sorted(entry_names, key=key)
