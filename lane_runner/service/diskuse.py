"""How much disk the home's parts take, by category (``doctor``), so an operator sees
what grows: worktrees, provider logs, lane state, the journal, quarantine, boards.

Sizes are what the files occupy (allocated blocks), links are never followed, and an
unreadable directory counts as empty rather than stopping the measure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from journal import names
from lane_runner.home import Home

CATEGORIES = ("worktrees", "logs", "lane state", "journal", "quarantine", "boards")


@dataclass
class Use:
    """Bytes on disk and how many things (worktrees, or files) make them."""

    bytes: int = 0
    count: int = 0

    def add(self, other: Use) -> None:
        self.bytes += other.bytes
        self.count += other.count


def measure(home: Home) -> dict[str, Use]:
    """Every category's use; absent parts of the home count as zero."""
    use = {category: Use() for category in CATEGORIES}
    use["boards"] = _tree(home.boards)
    use["logs"] = _tree(home.logs)
    for board in _directories(home.lanes):
        for entry in _entries(board):
            if entry.name == names.QUARANTINE_DIR and entry.is_dir(follow_symlinks=False):
                use["quarantine"].add(_tree(Path(entry.path)))
                continue
            kind = names.parse(entry.name).kind
            category = "lane state" if kind is names.Kind.LANE_STATE else "journal"
            use[category].add(_file(entry))
    for board in _directories(home.worktrees):
        for worktree in _directories(board):
            use["worktrees"].add(Use(_tree(worktree).bytes, 1))
    return use


def describe(use: dict[str, Use]) -> str:
    """One line: each category's size and count, the largest first."""
    parts = []
    for category in sorted(CATEGORIES, key=lambda c: -use[c].bytes):
        unit = "worktrees" if category == "worktrees" else "files"
        parts.append(f"{category} {_size(use[category].bytes)} ({use[category].count} {unit})")
    return ", ".join(parts)


def _tree(root: Path) -> Use:
    """A directory's files, recursively (the directories' own blocks included)."""
    total = Use()
    stack = [root]
    while stack:
        for entry in _entries(stack.pop()):
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
                total.bytes += _blocks(entry)
            else:
                total.add(_file(entry))
    return total


def _file(entry: os.DirEntry[str]) -> Use:
    return Use(_blocks(entry), 1)


def _blocks(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_blocks * 512
    except OSError:
        return 0  # gone meanwhile, or unreadable: nothing to count


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return list(listing)
    except OSError:
        return []  # absent, not a directory, or not ours to read: counts as empty


def _directories(directory: Path) -> list[Path]:
    return [Path(e.path) for e in _entries(directory) if e.is_dir(follow_symlinks=False)]


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    size = count / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
