"""Terminal records: build them, serialise them, and judge a payload against its path.

Pure: no I/O. A record is trusted only when its bytes are UTF-8 JSON, valid
against ``schemas/terminal-record.schema.json``, hold a finished result (see
``terminal_problem``), and name exactly the board, task, run, state (and for
evidence, digest) that its directory and file name say (§4 promise 3).
"""

from __future__ import annotations

import datetime
import enum
import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

import schemas

SCHEMA = "terminal-record.schema.json"
FORMAT = 1
MAX_RECORD_BYTES = 1024 * 1024


class State(enum.StrEnum):
    PENDING = "pending"
    PREPARED = "prepared"
    COMMITTED = "committed"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class RunIdentity:
    """The exact run a record may speak for."""

    board: str
    task_id: str
    run_id: int


@dataclass(frozen=True)
class TerminalRecord:
    """An accepted worker result for one exact run, in one journal state."""

    board: str
    task_id: str
    run_id: int
    result: dict[str, Any]
    summary: str
    metadata: dict[str, Any]
    state: State = State.PENDING
    recorded_at: str = field(default_factory=lambda: now_text())
    prepared_at: str | None = None
    committed_at: str | None = None
    conflict_reason: str | None = None

    @property
    def identity(self) -> RunIdentity:
        return RunIdentity(self.board, self.task_id, self.run_id)

    @property
    def digest(self) -> str:
        """``<d>``: the first 32 hex digits of SHA-256 over the canonical accepted result."""
        core = {
            "board": self.board,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "result": self.result,
            "summary": self.summary,
            "metadata": self.metadata,
        }
        return hashlib.sha256(canonical_json(core)).hexdigest()[:32]

    def as_prepared(self) -> TerminalRecord:
        return replace(self, state=State.PREPARED, prepared_at=now_text())

    def as_committed(self) -> TerminalRecord:
        return replace(self, state=State.COMMITTED, committed_at=now_text())

    def as_conflict(self, reason: str) -> TerminalRecord:
        return replace(self, state=State.CONFLICT, conflict_reason=reason)

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "format": FORMAT,
            "board": self.board,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "result": self.result,
            "summary": self.summary,
            "metadata": self.metadata,
            "state": str(self.state),
            "recorded_at": self.recorded_at,
        }
        for key in ("prepared_at", "committed_at", "conflict_reason"):
            if (value := getattr(self, key)) is not None:
                document[key] = value
        return document

    def to_bytes(self) -> bytes:
        """Sorted, indented JSON: operators read these files."""
        return (
            orjson.dumps(self.document(), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
        )


class Invalid(ValueError):
    """A payload that may not be trusted; ``reason`` is a short slug for quarantine names."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def now_text() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def canonical_json(value: object) -> bytes:
    """Sorted keys, no spaces: the form ``<d>`` is computed over."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def check_document(document: object) -> str | None:
    """The first schema error of a would-be record, or None."""
    return schemas.first_error(SCHEMA, document)


def from_document(document: dict[str, Any]) -> TerminalRecord:
    """A record from a schema-valid document."""
    return TerminalRecord(
        board=document["board"],
        task_id=document["task_id"],
        run_id=document["run_id"],
        result=document["result"],
        summary=document["summary"],
        metadata=document["metadata"],
        state=State(document["state"]),
        recorded_at=document["recorded_at"],
        prepared_at=document.get("prepared_at"),
        committed_at=document.get("committed_at"),
        conflict_reason=document.get("conflict_reason"),
    )


def decode(payload: bytes) -> TerminalRecord:
    """Parse and schema-check bytes, without any identity yet; raises Invalid."""
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError as error:
        raise Invalid("malformed-payload", str(error)) from error
    if not isinstance(document, dict):
        raise Invalid("malformed-payload", "not a JSON object")
    if (error_text := check_document(document)) is not None:
        raise Invalid("schema-invalid", error_text)
    if (problem := terminal_problem(document["result"], document["summary"])) is not None:
        raise Invalid("not-terminal", problem)
    return from_document(document)


def terminal_problem(result: dict[str, Any], summary: str) -> str | None:
    """Why ``result`` may not be committed as the end of a task, or None.

    The schema admits every worker answer; only a finished one may reach the
    board as done: status ``completed``, no blockers, a non-blank summary, and
    the record's summary equal to the result's (a record that says one thing
    and carries another was not written by the runner).
    """
    if result["status"] != "completed":
        return f"the result's status is {result['status']!r}, not 'completed'"
    if result["blockers"]:
        return f"the result reports {len(result['blockers'])} blocker(s)"
    if not result["summary"].strip():
        return "the result's summary is blank"
    if summary != result["summary"]:
        return "the record's summary differs from the result's"
    return None


def judge(
    payload: bytes, identity: RunIdentity, state: State, digest: str | None = None
) -> TerminalRecord:
    """The record in ``payload`` if it may speak for ``identity`` in ``state``; raises Invalid.

    ``digest`` is the ``<d>`` from a prepared/conflict name, which must match the content.
    """
    record = decode(payload)
    if record.identity != identity:
        raise Invalid("foreign-identity", f"names {record.identity}, path says {identity}")
    if record.state != state:
        raise Invalid("state-mismatch", f"says {record.state}, path says {state}")
    if digest is not None and record.digest != digest:
        raise Invalid("digest-mismatch", f"content digest {record.digest}, name says {digest}")
    return record
