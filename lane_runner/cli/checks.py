"""What ``doctor`` says: each check's verdict (pass, warn or fail), its words and its fix.

Shared by ``doctor.py`` and ``doctor_clis.py``; the exit status is the worst verdict's.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from lane_runner import redact


class Level(enum.IntEnum):
    PASS = 0
    WARN = 1
    FAIL = 2

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    fix: str = ""


def worst(checks: list[Check]) -> Level:
    return max((check.level for check in checks), default=Level.PASS)


def exit_status(checks: list[Check], strict: bool) -> int:
    """0 unless a check failed (or, with ``strict``, warned): then 1."""
    bar = Level.WARN if strict else Level.FAIL
    return 1 if worst(checks) >= bar else 0


def hide_secrets(check: Check) -> Check:
    """``check`` with every URL in its words redacted: a driver or HTTP client error may
    quote ``board_url`` or ``router_url`` whole, credentials included."""
    return dataclasses.replace(check, detail=redact.text(check.detail), fix=redact.text(check.fix))
