"""A runner's pause: a file in the home, so it survives restarts and any shell can set it.

While ``paused.json`` exists the daemon claims nothing; running work goes on to
its end. ``lane-runner pause`` writes it, ``lane-runner resume`` removes it, and
the daemon reads it on every turn of its loop (one ``open``: cheap, and a pause
takes effect at the next turn without a signal).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from lane_runner import files

MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Pause:
    reason: str
    at: float
    by: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pause(path: Path, reason: str, by: str) -> Pause:
    """Pause (again): the newest reason wins, the file is replaced atomically."""
    record = Pause(reason, time.time(), by)
    files.write(path, orjson.dumps(record.to_dict()))
    return record


def resume(path: Path) -> bool:
    """True when a pause was lifted, False when there was none."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def read(path: Path) -> Pause | None:
    """The pause in force, or None. A file that cannot be parsed still pauses:
    someone meant to pause, and claiming against their wish is the worse error. A link
    or FIFO there is no pause anyone wrote with ``lane-runner pause``: it is moved aside
    (``files.read``), never followed or waited on."""
    try:
        data = files.read(path, MAX_BYTES)[:MAX_BYTES]
    except FileNotFoundError:
        return None
    except OSError as error:
        return Pause(f"pause file unreadable ({error.strerror}); remove it to resume", 0.0, "")
    try:
        found = orjson.loads(data)
        return Pause(str(found["reason"]), float(found["at"]), str(found.get("by", "")))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return Pause("pause file unparsable; 'lane-runner resume' removes it", 0.0, "")
