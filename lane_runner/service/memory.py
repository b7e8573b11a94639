"""How much memory a new run could use: ``MemAvailable``, or the cgroup's room when lower.

The daemon claims nothing while this is under ``min_available_memory_mb`` (pressure
``critical``) and starts at most one new run per pass under ``elevated_memory_mb``
(``elevated``), as the Hermes dispatcher does: a static ``concurrency`` cannot see
other tenants, and an agent CLI with its tool processes takes hundreds of MiB. The
default ``concurrency`` (0) is sized by ``sizing.py``. Reading fails open (no number,
no hold): a host without ``/proc`` must still work.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MEMINFO = Path("/proc/meminfo")
SELF_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Reading:
    available: int
    """Bytes a new process could use."""
    source: str
    """``MemAvailable`` or the cgroup whose limit is the lower bound."""


def mem_available(meminfo: str) -> int | None:
    """``MemAvailable`` in bytes from ``/proc/meminfo`` text (pure)."""
    for line in meminfo.splitlines():
        name, _, rest = line.partition(":")
        if name == "MemAvailable":
            fields = rest.split()
            return int(fields[0]) * 1024 if fields and fields[0].isdigit() else None
    return None


def cgroup_room(limit: str, current: str, stat: str) -> int | None:
    """Bytes left under a cgroup v2 ``memory.max`` (pure); None when unlimited.

    ``memory.current`` counts page cache the kernel would drop before killing, so
    the inactive file pages of ``memory.stat`` are not counted as used.
    """
    limit = limit.strip()
    if limit == "max" or not limit.isdigit() or not current.strip().isdigit():
        return None
    inactive = 0
    for line in stat.splitlines():
        name, _, value = line.partition(" ")
        if name == "inactive_file" and value.strip().isdigit():
            inactive = int(value)
    used = max(0, int(current) - inactive)
    return max(0, int(limit) - used)


def cgroup_chain(self_cgroup: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """This process's unified (v2) cgroup directory under ``root`` and each ancestor up
    to ``root`` itself, from the text of ``/proc/self/cgroup``: a nested cgroup may be
    unlimited while an ancestor is limited. Under a cgroup namespace (a container's
    usual view) the process is at ``/`` and its own limits are ``root``'s files; on a
    host the root cgroup has none, so including it costs nothing."""
    for line in self_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            directory = root / path.lstrip("/")
            return [directory, *(p for p in directory.parents if p == root or root in p.parents)]
    return []


def _cgroup_reading(self_cgroup: Path = SELF_CGROUP, root: Path = CGROUP_ROOT) -> Reading | None:
    try:
        best: Reading | None = None  # the lowest room on the way up wins
        for directory in cgroup_chain(self_cgroup.read_text(), root):
            limit = directory / "memory.max"
            if limit.exists():
                room = cgroup_room(
                    limit.read_text(),
                    (directory / "memory.current").read_text(),
                    (directory / "memory.stat").read_text(),
                )
                if room is not None and (best is None or room < best.available):
                    name = directory.relative_to(root).as_posix()
                    best = Reading(room, f"cgroup /{'' if name == '.' else name}")
        return best
    except OSError as error:
        log.debug("cgroup memory unreadable, using MemAvailable alone: %s", error)
        return None


def read() -> Reading | None:
    """The lower of ``MemAvailable`` and the cgroup's room; None when neither is known."""
    readings: list[Reading] = []
    try:
        available = mem_available(MEMINFO.read_text())
    except OSError as error:
        log.debug("no /proc/meminfo, so no memory guard: %s", error)
        available = None
    if available is not None:
        readings.append(Reading(available, "MemAvailable"))
    cgroup = _cgroup_reading()
    if cgroup is not None:
        readings.append(cgroup)
    return min(readings, key=lambda r: r.available) if readings else None


def shortage(reading: Reading | None, minimum_mb: int) -> str | None:
    """Why no claim may happen now, or None (pure). 0 turns the guard off."""
    if not minimum_mb or reading is None:
        return None
    if reading.available >= minimum_mb * (1 << 20):
        return None
    return (
        f"memory pressure: {reading.available >> 20} MiB available ({reading.source}), "
        f"under min_available_memory_mb = {minimum_mb}"
    )


OK = "ok"
ELEVATED = "elevated"
CRITICAL = "critical"


def pressure(reading: Reading | None, minimum_mb: int, elevated_mb: int) -> str:
    """``critical`` under ``minimum_mb`` (no claims), ``elevated`` under ``elevated_mb`` (one
    new run per pass: each run takes memory a moment after it starts, so a burst of
    starts would overshoot), else ``ok`` (pure). Unknown memory is ``ok``: fail open."""
    if reading is None:
        return OK
    if shortage(reading, minimum_mb) is not None:
        return CRITICAL
    if elevated_mb and reading.available < elevated_mb * (1 << 20):
        return ELEVATED
    return OK
