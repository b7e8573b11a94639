"""Fixtures for the journal tests: both rename-no-replace paths, a journal, a board."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from doubles import SqliteBoard  # noqa: E402

from journal import Journal, LinuxFS  # noqa: E402


@pytest.fixture(params=[False, True], ids=["renameat2", "link-fallback"])
def fallback(request: pytest.FixtureRequest) -> bool:
    """Every test taking this runs twice: renameat2, and the forced link + unlink fallback."""
    return bool(request.param)


@pytest.fixture
def lanes(tmp_path: Path) -> Path:
    return tmp_path / "lanes"


@pytest.fixture
def journal(lanes: Path, fallback: bool) -> Journal:
    return Journal(lanes, LinuxFS(force_link_fallback=fallback))


@pytest.fixture
def board(tmp_path: Path) -> SqliteBoard:
    return SqliteBoard(tmp_path / "board.db")
