"""What a waste pass cost (pure): model requests and prompt tokens per accepted task,
read from the scripted server's log, and the second CLI runs after an accepted result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

BYTES_PER_TOKEN = 4
"""Prompt tokens are estimated from what was sent: the request body's bytes / 4. The
scripted server's own usage counts follow the turn number, not what a resumed or a
new session really sends."""


@dataclass(frozen=True)
class Accepted:
    """A task done on the board: when its one result was accepted, and how many
    completions the board holds for it (one, or the result was delivered twice)."""

    marker: str
    at: float
    completions: int


@dataclass(frozen=True)
class Cost:
    tasks: int
    accepted: int
    requests: int
    tokens: int
    sessions: int
    second_runs: int
    """Requests for a task after its result was accepted: a CLI run again over it."""
    twice: int
    """Tasks with more than one completion on the board."""

    @property
    def requests_per_task(self) -> float:
        return self.requests / self.accepted if self.accepted else 0.0

    @property
    def tokens_per_task(self) -> float:
        return self.tokens / self.accepted if self.accepted else 0.0


def tokens(entry: dict[str, Any]) -> int:
    """A request's prompt tokens, estimated from its body."""
    body = json.dumps(entry.get("body") or {}, separators=(",", ":"))
    return len(body.encode()) // BYTES_PER_TOKEN


def count(entries: list[dict[str, Any]], markers: list[str],
          accepted: list[Accepted]) -> Cost:
    """The cost of the tasks named by ``markers`` (requests of other tasks, and the
    CLIs' own requests that name no task, are not theirs)."""
    mine = [e for e in entries if e.get("marker") in set(markers)]
    when = {a.marker: a.at for a in accepted}
    late = [e for e in mine if e["marker"] in when and float(e["at"]) > when[e["marker"]]]
    sessions = {(e["marker"], e.get("session")) for e in mine}
    return Cost(
        tasks=len(markers),
        accepted=len(accepted),
        requests=len(mine),
        tokens=sum(tokens(e) for e in mine),
        sessions=len(sessions),
        second_runs=len(late),
        twice=sum(1 for a in accepted if a.completions > 1),
    )
