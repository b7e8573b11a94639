"""Board slugs, task ids and assignees: validated once, at the door.

The rules are docs/ARCHITECTURE.md §3.1 and §3.4.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lane_runner.errors import UsageError
from lane_runner.providers.registry import NAMES

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
PROVIDERS = NAMES
EFFORTS = ("low", "medium", "high", "xhigh")
AUTO_ASSIGNEE = "cli-auto"
#: A manual lane's assignee (PostgreSQL's claim function matches it too).
LANE_PATTERN = rf"cli-({'|'.join(map(re.escape, PROVIDERS))})-({'|'.join(EFFORTS)})"
_MANUAL = re.compile(LANE_PATTERN)
# A model name goes into a CLI's argv: no leading dash (it would read as an option), no
# whitespace or control characters (one argument stays one), and a bounded length.
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+\[\]-]{0,127}")
MODEL_RULE = "a letter or digit, then letters, digits and . _ : @ + [ ] - (at most 128)"


def is_valid_name(value: str) -> bool:
    """A board slug or task id: ``[A-Za-z0-9_.-]+`` and never ``.`` or ``..``."""
    return bool(_NAME.fullmatch(value)) and value not in (".", "..")


def check_name(kind: str, value: str) -> str:
    """Return ``value`` or raise a UsageError naming the ``kind`` ("board", "task id")."""
    if not is_valid_name(value):
        raise UsageError(
            f"invalid {kind} {value!r}: use letters, digits, '_', '.' and '-' (not '.' or '..')"
        )
    return value


@dataclass(frozen=True)
class Lane:
    """What an assignee asks for: a fixed provider and effort, or the router's choice."""

    provider: str | None
    effort: str | None

    @property
    def automatic(self) -> bool:
        return self.provider is None


def is_model_name(value: str) -> bool:
    """True for a model name safe to pass to a provider CLI (``MODEL_RULE``)."""
    return bool(_MODEL.fullmatch(value))


def is_lane_assignee(assignee: str) -> bool:
    """True for the assignees this runner owns (``cli-auto``, ``cli-<provider>-<effort>``)."""
    return assignee == AUTO_ASSIGNEE or bool(_MANUAL.fullmatch(assignee))


def parse_lane(assignee: str) -> Lane:
    """The lane an assignee names.

    Raises UsageError for anything outside docs/ARCHITECTURE.md §3.4.
    """
    if assignee == AUTO_ASSIGNEE:
        return Lane(None, None)
    match = _MANUAL.fullmatch(assignee)
    if not match:
        raise UsageError(
            f"invalid assignee {assignee!r}: use cli-auto or cli-<{'|'.join(PROVIDERS)}>-"
            f"<{'|'.join(EFFORTS)}>"
        )
    return Lane(match.group(1), match.group(2))
