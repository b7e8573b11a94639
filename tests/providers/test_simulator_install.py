"""The simulated CLIs the runner installs in its home, reachable by a worker user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from lane_runner.providers.simulators import install


def test_a_worker_user_reaches_the_simulators_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o077)  # the systemd unit's UMask=
    try:
        installed = install(tmp_path / "sim-bin")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "sim-bin").stat().st_mode) == 0o755
    assert {stat.S_IMODE(path.stat().st_mode) for path in installed.values()} == {0o755}
