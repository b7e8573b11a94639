"""One usage ledger record, and its form on disk and on the board (docs/ARCHITECTURE.md §3.7).

A record is a typed value everywhere in the runner; it becomes a JSON object only where
it is written (the home's ``usage/<board>.jsonl``, one a line) or sent (the board's
shared ledger, which keeps it whole). The object's keys and their order are those
format 1 has always had, so files written before read the same, and a record read and
written again (retention's rewrite) is the line it was. ``role`` came later: it is written
only for a reviewer's spend, so a record without it (every record written before) is an
implementer's, and an old line still writes back as it was.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from lane_runner import files
from lane_runner.providers.usage import KINDS, Basis

log = logging.getLogger(__name__)

FORMAT = 1
MAX_FILE_BYTES = 1 << 30


def day_of(at: float) -> str:
    """The UTC day of ``at`` (budgets and ``usage --by day`` count UTC days)."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).date().isoformat()


class Role(StrEnum):
    """Which part of a task an attempt played, so its spend is told apart: the
    implementer's turns, or a reviewer's (docs/verification.md). The lane state's attempt
    records and the ledger's records both carry it."""

    IMPLEMENT = "implement"
    REVIEW = "review"


@dataclass(frozen=True)
class Seen:
    """What a CLI's running total said when a cumulative record was made: the next
    figure of the session is counted as its difference from this."""

    tokens: Mapping[str, int]
    cost_usd: float | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.tokens, "cost_usd": self.cost_usd}

    @classmethod
    def from_dict(cls, found: Mapping[str, Any]) -> Seen:
        cost = found.get("cost_usd")
        return cls({kind: int(found.get(kind, 0)) for kind in KINDS},
                   None if cost is None else float(cost))


@dataclass(frozen=True)
class Record:
    """What one attempt spent, as one figure of its CLI added to the ledger."""

    id: str
    at: float
    day: str
    board: str
    task_id: str
    run_id: int
    attempt: int
    provider: str
    model: str
    session: str
    basis: Basis
    tokens: Mapping[str, int]
    """Tokens by kind (``providers.usage.KINDS``)."""
    cost_usd: float | None
    """None: unknown (no price for it, never a guess)."""
    cost_source: str | None
    """``cli`` (the CLI's own figure) or ``prices`` (the price table)."""
    seen: Seen | None = None
    """A cumulative record's: what the CLI's total said."""
    covers: tuple[str, ...] | None = None
    """A cumulative record's: the message records whose dollars its own hold."""
    unknown: tuple[str, ...] | None = None
    """Kinds the CLI gave an impossible number for (counted 0)."""
    role: Role = Role.IMPLEMENT
    """The attempt's role; written only when it is not the implementer's (the default)."""

    def to_dict(self) -> dict[str, Any]:
        """The record as the ledger's line and the board's copy hold it (format 1)."""
        found: dict[str, Any] = {
            "format": FORMAT, "id": self.id, "at": self.at, "day": self.day,
            "board": self.board, "task_id": self.task_id, "run_id": self.run_id,
            "attempt": self.attempt, "provider": self.provider, "model": self.model,
            "session": self.session, "basis": self.basis, "tokens": dict(self.tokens),
            "cost_usd": self.cost_usd, "cost_source": self.cost_source,
        }
        if self.seen is not None:
            found["seen"] = self.seen.to_dict()
        if self.covers is not None:
            found["covers"] = list(self.covers)
        if self.unknown is not None:
            found["unknown"] = list(self.unknown)
        if self.role is not Role.IMPLEMENT:
            found["role"] = self.role.value
        return found

    @classmethod
    def from_dict(cls, found: Mapping[str, Any]) -> Record:
        """A record from its JSON object. Raises NotARecord for one that is not."""
        try:
            if found.get("format") != FORMAT or not isinstance(found.get("id"), str):
                raise NotARecord("not a format 1 record with an id")
            tokens, basis = found["tokens"], found["basis"]
            if not isinstance(tokens, dict) or basis not in ("message", "cumulative"):
                raise NotARecord("no tokens, or no basis")
            cost, seen = found.get("cost_usd"), found.get("seen")
            covers, unknown = found.get("covers"), found.get("unknown")
            return cls(
                id=found["id"], at=float(found["at"]), day=str(found["day"]),
                board=str(found["board"]), task_id=str(found["task_id"]),
                run_id=int(found["run_id"]), attempt=int(found["attempt"]),
                provider=str(found["provider"]), model=str(found["model"]),
                session=str(found["session"]), basis=basis,
                tokens={str(kind): int(count) for kind, count in tokens.items()},
                cost_usd=None if cost is None else float(cost),
                cost_source=found.get("cost_source"),
                seen=Seen.from_dict(seen) if isinstance(seen, dict) else None,
                covers=_strings(covers),
                unknown=_strings(unknown),
                role=Role(found.get("role", Role.IMPLEMENT)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise NotARecord(f"{type(error).__name__}: {error}") from error


class NotARecord(ValueError):
    """A JSON object that is no ledger record (another format, a field missing or wrong)."""


def line(record: Record) -> bytes:
    """The record as one line of the ledger file."""
    return orjson.dumps(record.to_dict()) + b"\n"


def parse(data: bytes, where: Path) -> list[Record]:
    """The records of a ledger file's bytes: the first of each id, without a last line a
    crash cut short; a line that is no record is logged and skipped."""
    records: list[Record] = []
    ids: set[str] = set()
    lines = data.split(b"\n")
    for number, text in enumerate(lines[:-1], 1):  # the last is empty or cut short
        if not text.strip():
            continue
        try:
            found = orjson.loads(text)
            record = Record.from_dict(found if isinstance(found, dict) else {})
        except (orjson.JSONDecodeError, NotARecord) as error:
            log.warning("usage ledger %s line %d is not a record (%s); skipped",
                        where, number, error)
            continue
        if record.id not in ids:
            ids.add(record.id)
            records.append(record)
    return records


def _strings(found: Any) -> tuple[str, ...] | None:
    """A record's optional list of names (``covers``, ``unknown``) as a tuple."""
    return None if found is None else tuple(str(item) for item in found)


def read(path: Path) -> list[Record]:
    """Every record of the ledger file ``path``; none when it does not exist."""
    try:
        data = files.read(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return []
    return parse(data, path)


def from_board(found: Iterable[Mapping[str, Any]], board: str) -> list[Record]:
    """The records of a board's shared ledger; one that is not a record (written by a
    runner of another version) is logged and left out, as a line of the file is."""
    records: list[Record] = []
    for each in found:
        try:
            records.append(Record.from_dict(each))
        except NotARecord as error:
            log.warning("board %s's usage ledger holds a record this runner cannot read "
                        "(%s); left out", board, error)
    return records
