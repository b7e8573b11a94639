"""Files the runner puts in the worker user's own home (codex's rules file, the CLIs'
settled files).

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
from collections.abc import Sequence
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


#: The child that makes each missing path of its arguments, as the worker: a name with a
#: suffix (``settings.json``, ``config.toml``, ``CLAUDE.md``) an empty file (``{}`` for
#: JSON, which the CLIs parse), any other name an empty folder (``hooks``, ``rules``).
#: Several attempts start at once as one worker: a path another settle made between the
#: check and the make is settled too (``set -C``: a file is created, never truncated under
#: a CLI already reading it), and only a path still missing is an error.
_SETTLER = """umask 077
set -C
for p in "$@"; do
  [ -e "$p" ] || [ -L "$p" ] && continue
  mkdir -p -- "$(dirname -- "$p")" || exit 1
  case "$(basename -- "$p")" in
    *.json) said=$( { printf '{}\\n' > "$p" && chmod 0644 "$p"; } 2>&1 ) ;;
    *.*) said=$( { : > "$p" && chmod 0644 "$p"; } 2>&1 ) ;;
    *) said=$(mkdir -- "$p" 2>&1) ;;
  esac || [ -e "$p" ] || [ -L "$p" ] || { echo "$said" >&2; exit 1; }
done"""


def settle(paths: Sequence[Path], run_as: str | None) -> None:
    """Each of ``paths`` (a CLI's settled files) that is missing made empty, as ``run_as``.

    A sandbox binds what is there read-only and nothing where nothing is: a missing
    ``config.toml`` or ``hooks`` in a home the CLI may write would be created by one task
    and obeyed by the next CLI started as that worker. Made empty first, each is a
    read-only mount in every sandbox. OSError as ``publish``'s."""
    _run_as_worker(_SETTLER, [str(path) for path in paths], b"", run_as, "settle")


def publish(path: Path, data: bytes, run_as: str | None, *, replace: bool = True) -> None:
    """``data`` at ``path``, written as ``run_as`` (None: the runner's own user);
    ``replace=False`` leaves whatever is already there (the check made as the worker
    too). OSError naming the path and what the child said when it could not."""
    writer = _WRITER if replace else f'[ -e "$1" ] || [ -L "$1" ] || {{ {_WRITER}; }}'
    _run_as_worker(writer, [str(path)], data, run_as, f"write {path}")


def _run_as_worker(
    script: str, args: list[str], data: bytes, run_as: str | None, what: str
) -> None:
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", script, "lane-runner", *args],
            input=data,
            capture_output=True,
            timeout=WRITE_TIMEOUT,
            env={"PATH": os.defpath},
            cwd="/",
            **user_ids(run_as),
        )
    except subprocess.TimeoutExpired:
        raise OSError(f"{what} took over {WRITE_TIMEOUT:g} s") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OSError(f"cannot {what}: {said[-1] if said else done.returncode}")
