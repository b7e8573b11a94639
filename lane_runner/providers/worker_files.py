"""Files the runner puts in the worker user's own home (codex's rules file).

The worker's home is the worker's: a directory there may be a link the worker
planted, and a directory the runner created as root would be root's, so codex could
no longer write its sessions beside it. So such a file is written by a short child
process running as the worker user (``user_ids``), with exactly the reach the CLI
itself will have: it can create nothing the worker could not, and follows nothing
the worker could not follow anyway.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lane_runner.providers.proctree import user_ids

#: How long the child may take: a mkdir and a small write.
WRITE_TIMEOUT = 30.0

#: The child, in sh (the runner's own Python may be out of the worker's reach): the
#: directories (0700, as codex makes its own), then the file written beside its name
#: and renamed over it (0644), so codex reads the old file or the new one.
_WRITER = (
    'umask 077 && mkdir -p -- "$(dirname -- "$1")" && cat > "$1.$$.tmp" '
    '&& chmod 0644 "$1.$$.tmp" && mv -f -- "$1.$$.tmp" "$1"'
)


def publish(path: Path, data: bytes, run_as: str | None) -> None:
    """``data`` at ``path``, written as ``run_as`` (None: the runner's own user);
    OSError naming the path and what the child said when it could not."""
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", _WRITER, "lane-runner", str(path)],
            input=data,
            capture_output=True,
            timeout=WRITE_TIMEOUT,
            env={"PATH": os.defpath},
            cwd="/",
            **user_ids(run_as),
        )
    except subprocess.TimeoutExpired:
        raise OSError(f"writing {path} took over {WRITE_TIMEOUT:g} s") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OSError(f"cannot write {path}: {said[-1] if said else done.returncode}")
