"""Prepared homes for the operator commands, on the daemon tests' real harness."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane_runner.leftovers import find as find_workers
from tests.daemon.conftest import Lane


@pytest.fixture
def lane(tmp_path: Path) -> Iterator[Lane]:
    harness = Lane(tmp_path / "home")
    yield harness
    harness.stop_all()
    for pid in find_workers(harness.node()):
        os.kill(pid, signal.SIGKILL)
    harness.store.close()
