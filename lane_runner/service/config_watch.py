"""Configuration changes, noticed without a signal.

Operators edit ``config.toml`` and expect the daemon to take it; Kubernetes replaces a
mounted ConfigMap by swapping a symbolic link (``config.toml -> ..data/config.toml``,
``..data -> ..2026_12_03_…``), so the file's own name never changes. The watch
compares what the name leads to now (device, inode, size, modification time, all
through the links) with what it led to at the last look: any difference, or the file
appearing or going, is a change, and the daemon reloads as on SIGHUP. A reload that
fails keeps the configuration in force (``Daemon._reload``); what it said is kept
here for ``status`` until a reload succeeds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lane_runner import config

#: How often the daemon looks (seconds): a stat of one path, cheap at any rate, and
#: well under the minute a ConfigMap takes to reach a pod.
INTERVAL = 2.0

Fingerprint = tuple[int, int, int, int] | None


def fingerprint(path: Path) -> Fingerprint:
    """What ``path`` leads to now, through its links; None when nothing is there."""
    try:
        seen = os.stat(path)
    except OSError:
        return None
    return (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns)


@dataclass
class ConfigWatch:
    """The configuration file's last fingerprint, and how the last reload went."""

    path: Path
    seen: Fingerprint = None
    error: str | None = None
    """Why the last reload was refused (the file as it is now is not in force); None: it is."""
    restart_needed: list[str] = field(default_factory=list)
    """Keys whose new value waits for a restart."""

    @classmethod
    def of(cls, home: Path, environ: Mapping[str, str] = os.environ) -> ConfigWatch:
        path, _ = config.config_file(home, environ)
        return cls(path, fingerprint(path))

    def changed(self) -> bool:
        """Whether the file changed since the last look (the look is remembered)."""
        now = fingerprint(self.path)
        if now == self.seen:
            return False
        self.seen = now
        return True

    def reloaded(self, restart_needed: list[str]) -> None:
        self.error = None
        self.restart_needed = list(restart_needed)

    def refused(self, error: str) -> None:
        self.error = error

    def to_dict(self) -> dict[str, object]:
        return {"file": str(self.path), "error": self.error, "restart_needed": self.restart_needed}
