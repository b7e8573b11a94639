"""What an attempt's event stream has told us so far, shared by both adapters.

Each adapter turns its CLI's JSONL events into updates of one ``Reading``:
the session id, the last result-shaped object, and the CLI-level error signals
handed to ``classify``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from lane_runner.providers.usage import LimitNotice, UsageReport

RESULT_STATUSES = frozenset({"completed", "incomplete", "blocked"})


@dataclass(frozen=True)
class AnswerShape:
    """Which answer an attempt ends with: a worker's result, or a reviewer's verdict
    (docs/verification.md). The CLI is handed its wire schema; its answer is found in
    the stream by ``key`` having one of ``values``, and validated against ``schema``."""

    name: str  # in what people read: "worker result", "review"
    schema: str
    wire: str
    key: str
    values: frozenset[str]


WORKER_ANSWER = AnswerShape(
    "worker result", "worker-result.schema.json", "worker-result.wire.json", "status",
    RESULT_STATUSES,
)
REVIEW_ANSWER = AnswerShape(
    "review", "review-result.schema.json", "review-result.wire.json", "verdict",
    frozenset({"approve", "request_changes"}),
)


@dataclass
class Signals:
    """CLI-level evidence gathered while an attempt streamed."""

    errors: list[str] = field(default_factory=list)
    """Top-level error texts: codex ``error``/``turn.failed``, claude ``is_error`` results."""
    result_is_error: bool = False
    stderr: str = ""
    exit_status: int | None = None
    signal: int | None = None

    def add_error(self, text: str, keep: int = 20) -> None:
        self.errors.append(text[:2000])
        del self.errors[:-keep]


@dataclass
class Reading:
    session_id: str | None = None
    candidate: dict[str, Any] | None = None
    signals: Signals = field(default_factory=Signals)
    finished: bool = False
    """The CLI gave its final word (claude ``result``; codex ``turn.completed`` or
    ``turn.failed``): each adapter's ``observe`` says which event that is, and the
    supervisor then gives the CLI only ``closing_grace`` to exit."""
    tools: set[str] = field(default_factory=set)
    """The ids of the CLI's tool calls that have begun and not yet ended (each adapter's
    ``track_tools`` keeps them): while any is in flight the stall limit is the tool's."""
    unanswered: str | None = None
    """Set by the adapter when the CLI ended its turn cleanly without an answer: why,
    in words the next attempt is told."""
    model: str = ""
    """The model the attempt was started with: codex's usage does not name it."""
    usage: list[UsageReport] = field(default_factory=list)
    """Usage the CLI reported and nobody has taken yet (``take_usage``)."""
    limit: LimitNotice | None = None
    """The latest usage limit the CLI reported, with its reset when it said one."""
    said: list[str] = field(default_factory=list)
    """The pieces of the model's message so far, for a CLI that streams it as deltas
    (gemini): its adapter joins them when the turn ends."""
    zone: str | None = None
    """The CLI's local time zone (its ``TZ``; None: the host's), for reset times it
    prints without one."""
    clock: Callable[[], float] = time.time
    """The wall clock a reset time said without a date is the next one after."""
    shape: AnswerShape = WORKER_ANSWER
    """The answer this attempt ends with (a worker's result or a reviewer's verdict)."""

    def heard_error(self, said: str, limit: LimitNotice | None) -> None:
        """An error the CLI reported, and the usage limit it announced with it, if any
        (the adapter's own reading of its words): a later error without one keeps it."""
        self.signals.add_error(said)
        self.limit = limit or self.limit

    def take_usage(self) -> list[UsageReport]:
        """The usage reported since the last call, each report handed over once."""
        taken, self.usage = self.usage, []
        return taken


def result_object(value: object, shape: AnswerShape = WORKER_ANSWER) -> dict[str, Any] | None:
    """An object of ``shape`` (a worker's result by default) in ``value`` (a dict or JSON
    text), if any.

    Agents sometimes wrap the JSON in prose or a code fence, so after the whole
    text fails to parse, the outermost ``{...}`` span is tried.
    """
    if isinstance(value, dict):
        return value if value.get(shape.key) in shape.values else None
    if not isinstance(value, str) or "{" not in value:
        return None
    for text in (value, value[value.find("{") : value.rfind("}") + 1]):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(parsed, dict) and parsed.get(shape.key) in shape.values:
            return parsed
    return None
