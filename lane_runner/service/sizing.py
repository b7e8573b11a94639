"""How many slots ``concurrency = 0`` means: what this runner's own cgroup may use, else
the node's.

A pod with limits gets a cgroup v2 ``memory.max`` and ``cpu.max``; sizing the slots to
the node's ``MemTotal`` and CPUs instead would start runs the cgroup then kills (the
OOM killer) or starves (CPU throttling). So the limits of this process's cgroup and
of every ancestor are read (the lowest wins: a nested cgroup may be unlimited under
a limited one) in one small effectful function, ``read_limits``, and the slots are
decided from them by a pure one, ``derived_concurrency``. Reading fails open: a
host without ``/proc`` or cgroup v2 is sized by what it can tell, else 4 slots.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from lane_runner.service.memory import CGROUP_ROOT, MEMINFO, SELF_CGROUP, cgroup_chain

log = logging.getLogger(__name__)

#: The most slots ``concurrency = 0`` derives, whatever the limits: past this the
#: accounts are the limit, not the machine.
MAX_DERIVED = 16
#: Slots when nothing is known of memory or CPUs (the old fixed default).
UNKNOWN = 4
#: Runs per CPU: a run's CLI mostly waits on its model's answers, and its builds and
#: tests come in bursts, so two runs share a CPU without starving each other.
RUNS_PER_CPU = 2


@dataclass(frozen=True)
class Limits:
    """What this runner may use in all; None where nothing is known."""

    memory: int | None
    """Bytes: the lowest cgroup ``memory.max``, or ``MemTotal`` when lower or alone."""
    cpus: float | None
    """CPUs: the lowest cgroup ``cpu.max`` quota, or the CPUs this process may run on."""


def mem_total(meminfo: str) -> int | None:
    """``MemTotal`` in bytes from ``/proc/meminfo`` text (pure)."""
    for line in meminfo.splitlines():
        name, _, rest = line.partition(":")
        if name == "MemTotal":
            fields = rest.split()
            return int(fields[0]) * 1024 if fields and fields[0].isdigit() else None
    return None


def memory_max(text: str) -> int | None:
    """A cgroup v2 ``memory.max`` in bytes (pure); None for ``max`` or anything unreadable."""
    text = text.strip()
    return int(text) if text.isdigit() else None


def cpu_max(text: str) -> float | None:
    """A cgroup v2 ``cpu.max`` (``<quota> <period>``, microseconds) as CPUs (pure); None
    for ``max`` (no quota) or anything unreadable."""
    fields = text.split()
    if len(fields) != 2 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    quota, period = int(fields[0]), int(fields[1])
    return quota / period if period else None


def _lowest(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return min(known) if known else None


def read_limits(
    *,
    meminfo: Path = MEMINFO,
    self_cgroup: Path = SELF_CGROUP,
    root: Path = CGROUP_ROOT,
    node_cpus: int | None = None,
) -> Limits:
    """The limits of this process's cgroup v2 (named by ``self_cgroup`` under ``root``)
    and its ancestors, each bounded by the node's: ``MemTotal`` of ``meminfo``, and
    ``node_cpus`` (default: the CPUs this process may run on)."""
    memories: list[float | None] = []
    cpus: list[float | None] = []
    try:
        memories.append(mem_total(meminfo.read_text()))
    except OSError as error:
        log.debug("no %s, so no MemTotal: %s", meminfo, error)
    try:
        for directory in cgroup_chain(self_cgroup.read_text(), root):
            memories.append(memory_max(_read(directory / "memory.max")))
            cpus.append(cpu_max(_read(directory / "cpu.max")))
    except OSError as error:
        log.debug("cgroup limits unreadable, sizing by the node alone: %s", error)
    cpus.append(float(node_cpus if node_cpus is not None else _node_cpus()))
    memory = _lowest(memories)
    return Limits(None if memory is None else int(memory), _lowest(cpus))


def _read(path: Path) -> str:
    """A cgroup file's text; "max" (no limit) where the controller is not enabled."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return "max"


def _node_cpus() -> int:
    """The CPUs this process may run on (its affinity: a cpuset narrows it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError) as error:
        log.debug("no CPU affinity here, counting every CPU: %s", error)
        return os.cpu_count() or 1


def derived_concurrency(limits: Limits, per_run_mb: int) -> int:
    """The slots ``concurrency = 0`` means (pure): one per ``per_run_mb`` of memory and
    ``RUNS_PER_CPU`` per CPU, the fewer of the two, from 1 to ``MAX_DERIVED``;
    ``UNKNOWN`` when neither is known."""
    bounds: list[int] = []
    if limits.memory is not None:
        bounds.append(limits.memory // (per_run_mb << 20))
    if limits.cpus is not None:
        bounds.append(math.floor(limits.cpus * RUNS_PER_CPU))
    if not bounds:
        return UNKNOWN
    return max(1, min(MAX_DERIVED, *bounds))
