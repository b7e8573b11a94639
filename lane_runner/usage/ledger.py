"""The usage ledger: what every attempt spent, by task, run, provider, model and day.

One append-only file per board, ``usage/<board>.jsonl`` in the home, one JSON record
a line, each written and fsynced the moment the CLI reports the spend (before the
attempt ends), so a crash loses at most what the CLI had not yet said. A record has
an ``id``; a reader keeps the first record of each id and skips a last line a crash
cut short, so nothing is counted twice.

How a CLI's figures become records (``attribute``, pure):

- a *cumulative* figure (codex's thread total, claude's session total) is recorded as
  its difference from the same session's previous cumulative record, less what
  *message* records of the session (below) counted since, so a resumed session is
  counted once, including the turns of an attempt killed before it could report;
- a *message* figure (one claude response, as the stream shows it) is recorded once
  per message id: it is what an attempt killed before its ``result`` is known to
  have spent (claude's total after such a kill no longer includes it).

Costs are the CLI's own (claude's ``costUSD``), else the operator's price table
(``prices``, dollars per million tokens by kind), else unknown (None), never guessed.

A board every runner of it shares (``board/base.py`` ``SharedLedger``) gets a copy of
each record after the home has it (``usage/share.py``); ``usage/<board>.sent``
lists the ids the board confirmed, so what is left is sent again later, and records
older than ``usage_retention_days`` leave the home only once the board holds them.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lane_runner import files
from lane_runner.providers.usage import COUNTED, KINDS, UsageReport

log = logging.getLogger(__name__)

FORMAT = 1
#: Dimensions ``summarize`` groups by (``lane-runner usage --by``).
DIMENSIONS = ("board", "task", "run", "provider", "model", "day")
MAX_FILE_BYTES = 1 << 30
#: The kinds a message reports exactly (its output is the count it began with).
INPUT_KINDS = ("input", "cached_input", "cache_write")

Prices = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Attempt:
    """Which attempt a figure belongs to."""

    board: str
    task_id: str
    run_id: int
    attempt: int
    provider: str


def day_of(at: float) -> str:
    """The UTC day of ``at`` (budgets and ``usage --by day`` count UTC days)."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).date().isoformat()


def price(model: str, counts: Mapping[str, int], prices: Prices) -> float | None:
    """Dollars for ``counts`` of ``model`` by the price table, or None when the table has
    no price for a kind spent (never a guess)."""
    table = prices.get(model)
    if table is None:
        return None
    total = 0.0
    for kind in COUNTED:
        if counts.get(kind, 0) == 0:
            continue
        per_million = table.get(kind)
        if per_million is None:
            return None
        total += counts[kind] * per_million / 1_000_000
    return total


def attribute(
    report: UsageReport,
    attempt: Attempt,
    history: Sequence[dict[str, Any]],
    prices: Prices,
    at: float,
) -> list[dict[str, Any]]:
    """The records ``report`` adds to ``history`` (the task's records, oldest first)."""
    session = report.session_id or ""
    mine = [
        r for r in history
        if r["task_id"] == attempt.task_id and r["provider"] == attempt.provider
        and r["session"] == session
    ]
    added: list[dict[str, Any]] = []
    cost: float | None
    source: str | None
    for model, counts in report.models.items():
        if report.basis == "message":
            record_id = "/".join(
                (attempt.board, attempt.task_id, attempt.provider, session, report.key)
            )
            if any(r["id"] == record_id for r in mine):
                continue
            spent = {kind: counts.get(kind, 0) for kind in KINDS}
            cost, source = _priced(model, spent, prices)
            added.append(_record(record_id, attempt, session, model, "message", spent, cost,
                                 source, at))
            continue
        same = [r for r in mine if r["model"] == model]
        seen = {kind: counts.get(kind, 0) for kind in KINDS}
        seen_cost = report.cost_usd.get(model)
        earlier = next((i for i in range(len(same) - 1, -1, -1)
                        if same[i]["basis"] == "cumulative"), None)
        before: Mapping[str, Any] = same[earlier]["seen"] if earlier is not None else {}
        if any(seen[kind] < before.get(kind, 0) for kind in KINDS):
            before = {}  # the CLI's count began again (a session started afresh)
        since = same[earlier + 1:] if earlier is not None else same
        messages = [r for r in since if r["basis"] == "message"]
        counted = _sum(r["tokens"] for r in messages)
        grown = {kind: seen[kind] - before.get(kind, 0) for kind in KINDS}
        spent = {kind: max(0, grown[kind] - counted[kind]) for kind in COUNTED}
        spent["reasoning"] = max(0, seen["reasoning"] - before.get("reasoning", 0))
        if seen_cost is not None:
            cost = max(0.0, seen_cost - float(before.get("cost_usd") or 0.0))
            source = "cli"
        else:
            cost, source = _priced(model, spent, prices)
        record = _record(f"{uuid.uuid4().hex}", attempt, session, model, "cumulative", spent,
                         cost, source, at)
        record["seen"] = {**seen, "cost_usd": seen_cost}
        if seen_cost is not None and all(grown[k] >= counted[k] for k in INPUT_KINDS):
            # The CLI's total holds these messages (their input is in it), so its dollars
            # hold theirs; a total that does not (an invocation killed before its result)
            # leaves them unpriced.
            record["covers"] = [r["id"] for r in messages]
        added.append(record)
    if report.unknown:
        for record in added:
            record["unknown"] = list(report.unknown)  # counted 0 here: the spend is not known
    return added


def _priced(
    model: str, spent: Mapping[str, int], prices: Prices
) -> tuple[float | None, str | None]:
    cost = price(model, spent, prices)
    return cost, None if cost is None else "prices"


def _record(
    record_id: str, attempt: Attempt, session: str, model: str, basis: str,
    spent: dict[str, int], cost: float | None, source: str | None, at: float,
) -> dict[str, Any]:
    return {
        "format": FORMAT, "id": record_id, "at": at, "day": day_of(at),
        "board": attempt.board, "task_id": attempt.task_id, "run_id": attempt.run_id,
        "attempt": attempt.attempt, "provider": attempt.provider, "model": model,
        "session": session, "basis": basis, "tokens": spent, "cost_usd": cost,
        "cost_source": source,
    }


def _sum(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(KINDS, 0)
    for item in counts:
        for kind in KINDS:
            total[kind] += int(item.get(kind, 0))
    return total


@dataclass
class Totals:
    """Spend summed over records: tokens by kind, dollars known, and how many records
    had no known cost (their dollars are missing from ``cost_usd``)."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    cost_usd: float = 0.0
    unpriced: int = 0
    records: int = 0

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens[kind] for kind in COUNTED)

    def add(self, record: Mapping[str, Any], covered: frozenset[str] = frozenset()) -> None:
        """Add one record; ``covered``: message ids whose dollars a later total holds."""
        for kind in KINDS:
            self.tokens[kind] += int(record["tokens"].get(kind, 0))
        if record["cost_usd"] is None:
            self.unpriced += record["id"] not in covered
        else:
            self.cost_usd += float(record["cost_usd"])
        self.records += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": dict(self.tokens),
            "total_tokens": self.total_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "cost_complete": self.unpriced == 0,
            "unpriced_records": self.unpriced,
            "records": self.records,
        }


def covered(records: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The message records whose dollars a CLI's later total holds."""
    return frozenset(i for r in records for i in r.get("covers") or ())


def total(records: Iterable[Mapping[str, Any]]) -> Totals:
    records = list(records)
    held = covered(records)
    totals = Totals()
    for record in records:
        totals.add(record, held)
    return totals


def merged(*copies: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ledger from several copies of it (the board's, the home's): the first record
    of each id, so a record both hold is counted once and one only the home holds yet
    (not sent) still counts."""
    seen: set[str] = set()
    records: list[dict[str, Any]] = []
    for copy in copies:
        for record in copy:
            if record["id"] not in seen:
                seen.add(record["id"])
                records.append(dict(record))
    return records


def unsent(records: Iterable[Mapping[str, Any]], sent: Collection[str]) -> list[dict[str, Any]]:
    """The records the board has not confirmed taking: what to send (again)."""
    return [dict(r) for r in records if r["id"] not in sent]


def kept(
    records: Iterable[Mapping[str, Any]], sent: Collection[str], oldest_day: str
) -> list[dict[str, Any]]:
    """The records the home keeps under retention: those of ``oldest_day`` or later, and
    every record the board has not confirmed, however old (the home's is its only copy)."""
    return [dict(r) for r in records if r["day"] >= oldest_day or r["id"] not in sent]


def task_usage(records: Iterable[Mapping[str, Any]], task_id: str) -> dict[str, Any]:
    """What a task spent: in all, per run and per model (``task show`` and the completed
    event's metadata both give this)."""
    mine = [r for r in records if r["task_id"] == task_id]
    return {
        **total(mine).to_dict(),
        "by_run": summarize(mine, ("run",)),
        "by_model": summarize(mine, ("provider", "model")),
    }


def on_day(records: Iterable[Mapping[str, Any]], at: float) -> Totals:
    """What ``records`` spent on the UTC day of ``at`` (a board's daily budget)."""
    day = day_of(at)
    return total(r for r in records if r["day"] == day)


def summarize(records: Iterable[Mapping[str, Any]], by: Sequence[str]) -> list[dict[str, Any]]:
    """Totals per distinct value of the dimensions ``by`` (``DIMENSIONS``), sorted."""
    records = list(records)
    held = covered(records)
    groups: dict[tuple[Any, ...], Totals] = {}
    for record in records:
        key = tuple(_dimension(record, name) for name in by)
        groups.setdefault(key, Totals()).add(record, held)
    return [
        {**dict(zip(by, key, strict=True)), **totals.to_dict()}
        for key, totals in sorted(groups.items(), key=lambda item: tuple(map(str, item[0])))
    ]


def _dimension(record: Mapping[str, Any], name: str) -> Any:
    return {"task": record["task_id"], "run": record["run_id"]}.get(name, record.get(name))


def parse(data: bytes, where: Path) -> list[dict[str, Any]]:
    """The records of a ledger file's bytes: the first of each id, without a last line a
    crash cut short; a line that is no record is logged and skipped."""
    records: list[dict[str, Any]] = []
    ids: set[str] = set()
    lines = data.split(b"\n")
    for number, line in enumerate(lines[:-1], 1):  # the last is empty or cut short
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
            usable = isinstance(record, dict) and record.get("format") == FORMAT
            usable = usable and isinstance(record.get("id"), str) and isinstance(
                record.get("tokens"), dict)
        except orjson.JSONDecodeError:
            usable = False
        if not usable:
            log.warning("usage ledger %s line %d is not a record; skipped", where, number)
            continue
        if record["id"] not in ids:
            ids.add(record["id"])
            records.append(record)
    return records


def read(path: Path) -> list[dict[str, Any]]:
    """Every record of the ledger file ``path``; none when it does not exist."""
    try:
        data = files.read(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return []
    return parse(data, path)


class Ledger:
    """The daemon's writer of the home's ledgers; one per process, safe across threads.

    Each board's records are read once and kept; appends go to the file first
    (fsynced), then to the kept list, so what a budget reads is what is durable.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._boards: dict[str, list[dict[str, Any]]] = {}
        self._sent: dict[str, set[str]] = {}

    def path(self, board: str) -> Path:
        return self.directory / f"{board}.jsonl"

    def sent_path(self, board: str) -> Path:
        """The ids of ``board``'s records its shared ledger confirmed taking, one a line."""
        return self.directory / f"{board}.sent"

    def unsent(self, board: str) -> list[dict[str, Any]]:
        """The records of ``board`` its shared ledger has not confirmed yet."""
        with self._lock:
            return unsent(self._loaded(board), self._sent_ids(board))

    def mark_sent(self, board: str, ids: Iterable[str]) -> None:
        """Note that the board took ``ids``. Not fsynced: a mark a crash loses only makes
        its record be sent again, which the board ignores (the id is its key)."""
        with self._lock:
            sent = self._sent_ids(board)
            new = [i for i in dict.fromkeys(ids) if i not in sent]
            if new:
                self._write_all(self.sent_path(board), "".join(f"{i}\n" for i in new).encode())
                sent.update(new)

    def prune(self, board: str, oldest_day: str) -> int:
        """Drop the records of days before ``oldest_day`` that the board holds (``kept``):
        the file is rewritten atomically, then the marks of what went. How many went."""
        with self._lock:
            records = self._loaded(board)
            sent = self._sent_ids(board)
            keep = kept(records, sent, oldest_day)
            if len(keep) == len(records):
                return 0
            files.write(self.path(board), b"".join(orjson.dumps(r) + b"\n" for r in keep))
            self._boards[board] = keep
            # A crash here leaves marks of records that are gone: never read again.
            held = sent & {r["id"] for r in keep}
            files.write(self.sent_path(board), "".join(f"{i}\n" for i in sorted(held)).encode())
            self._sent[board] = held
            return len(records) - len(keep)

    def _sent_ids(self, board: str) -> set[str]:
        if board not in self._sent:
            try:
                data = files.read(self.sent_path(board), MAX_FILE_BYTES)
            except FileNotFoundError:
                data = b""
            # A last line a crash cut short is an id nothing has: its record is re-sent.
            self._sent[board] = {line for line in data.decode(errors="replace").split("\n")
                                 if line}
        return self._sent[board]

    def records(self, board: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._loaded(board))

    def _loaded(self, board: str) -> list[dict[str, Any]]:
        if board not in self._boards:
            self._boards[board] = read(self.path(board))
        return self._boards[board]

    def record(
        self, attempt: Attempt, report: UsageReport, prices: Prices, at: float
    ) -> list[dict[str, Any]]:
        """Attribute ``report`` to ``attempt`` and append what it adds, durably; the new
        records (none when the figure was counted already)."""
        with self._lock:
            book = self._loaded(attempt.board)
            history = [r for r in book if r["task_id"] == attempt.task_id]
            added = attribute(report, attempt, history, prices, at)
            if added:
                self._append(self.path(attempt.board), added)
                book.extend(added)
            return added

    def _append(self, path: Path, records: list[dict[str, Any]]) -> None:
        self._write_all(path, b"".join(orjson.dumps(record) + b"\n" for record in records),
                        sync=True)

    @staticmethod
    def _write_all(path: Path, data: bytes, *, sync: bool = False) -> None:
        """Append ``data`` (whole lines) to ``path``, after whatever a crash left there."""
        files.ensure_directory(path.parent)
        try:
            last = files.read_tail(path, 1)
        except FileNotFoundError:
            last = b""
        if last not in (b"", b"\n"):
            data = b"\n" + data  # a line a crash cut short stays alone, skipped
        fd = files.open_append(path)
        try:
            written = os.write(fd, data)
            while written < len(data):
                written += os.write(fd, data[written:])
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
