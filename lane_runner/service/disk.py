"""Free space before claiming: ``min_free_disk_mb`` for the home and each workspace.

A run writes to two places: the home (journal, lane state, task logs, the task's
worktree) and the repository its worktree belongs to (git's objects). A full disk
met in the middle of a run costs a cooldown at best and a half-written worktree at
worst, so the daemon claims nothing while either filesystem has less than
``min_free_disk_mb`` free, and ``status`` says which and how much. Running work
goes on: it may be what frees the space (a run that ends lets its worktree go). The
daemon knows a repository once it has claimed a task of it; a run measures its own
before it starts (``run/workplace.py``), so the first task of a full one goes back
to ready, uncounted, instead of failing half-way.
Reading fails open: a path that cannot be measured (gone, no permission) holds
nothing, and is logged.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Space:
    path: str
    free: int
    """Bytes an unprivileged writer may still use (``f_bavail``: root's reserve not counted)."""


def measure(paths: Iterable[str]) -> list[Space]:
    """The free space of each path's filesystem; a path that cannot be measured is left out."""
    found: list[Space] = []
    for path in paths:
        try:
            stat = os.statvfs(path)
        except OSError as error:
            log.debug("free space of %s unknown (%s); it holds no claims", path, error)
            continue
        found.append(Space(path, stat.f_bavail * stat.f_frsize))
    return found


def shortage(spaces: Sequence[Space], minimum_mb: int) -> str | None:
    """Why nothing may be claimed now, or None (pure); 0 turns the guard off."""
    if not minimum_mb:
        return None
    short = [space for space in spaces if space.free < minimum_mb << 20]
    if not short:
        return None
    shown = ", ".join(f"{space.path} has {space.free >> 20} MiB free" for space in short)
    return f"disk space: {shown}, under min_free_disk_mb = {minimum_mb}"
