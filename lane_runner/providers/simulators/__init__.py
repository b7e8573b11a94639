"""Simulated ``codex``, ``claude``, ``opencode`` and ``gemini`` CLIs
(``python -P -m lane_runner.providers.simulators.<cli>``).

``install(bin_dir)`` writes executable wrappers named like the real CLIs, so
anything that runs "the codex binary" can run the simulator instead.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

CLIS = ("codex", "claude", "opencode", "gemini")


def install(bin_dir: Path) -> dict[str, Path]:
    """Write a wrapper script per simulated CLI into ``bin_dir``; their paths.

    ``-P`` keeps the working directory (a task's workspace) off ``sys.path``. The
    directory is 0755 whatever the umask (the unit's is 077): a worker user runs them.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    bin_dir.chmod(0o755)
    installed: dict[str, Path] = {}
    for cli in CLIS:
        path = bin_dir / cli
        path.write_text(
            "#!/bin/sh\n"
            f"exec {shlex.quote(sys.executable)} -P -m "
            f'lane_runner.providers.simulators.{cli} "$@"\n'
        )
        path.chmod(0o755)
        installed[cli] = path
    return installed
