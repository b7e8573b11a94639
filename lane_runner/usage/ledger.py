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

A record's shape and its line are ``usage/record.py``; what records add up to,
``usage/spend.py``.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lane_runner import files
from lane_runner.providers.usage import COUNTED, KINDS, Basis, UsageReport
from lane_runner.usage.record import MAX_FILE_BYTES, Record, Role, Seen, day_of, line, read

log = logging.getLogger(__name__)

#: The kinds a message reports exactly (its output is the count it began with).
INPUT_KINDS = ("input", "cached_input", "cache_write")

Prices = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Attempt:
    """Which attempt a figure belongs to, and the role it played (its records say it)."""

    board: str
    task_id: str
    run_id: int
    attempt: int
    provider: str
    role: Role = Role.IMPLEMENT


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
    history: Sequence[Record],
    prices: Prices,
    at: float,
) -> list[Record]:
    """The records ``report`` adds to ``history`` (the task's records, oldest first)."""
    session = report.session_id or ""
    mine = [
        r for r in history
        if r.task_id == attempt.task_id and r.provider == attempt.provider
        and r.session == session
    ]
    where = _Session(attempt, session, mine, prices, at)
    added: list[Record] = []
    for model, counts in report.models.items():
        if report.basis == "message":
            record = _message(where, report.key, model, counts)
        else:
            record = _cumulative(where, model, counts, report.cost_usd.get(model))
        if record is not None:
            added.append(record)
    if report.unknown:
        # Counted 0 here: the spend is not known.
        added = [replace(record, unknown=tuple(report.unknown)) for record in added]
    return added


@dataclass(frozen=True)
class _Session:
    """Where a figure is recorded: its attempt and session, the session's earlier
    records (of the task and provider, oldest first), the price table and the time."""

    attempt: Attempt
    session: str
    records: Sequence[Record]
    prices: Prices
    at: float


def _message(
    where: _Session, key: str, model: str, counts: Mapping[str, int]
) -> Record | None:
    """A message figure's record, once per message id (None when already recorded)."""
    attempt = where.attempt
    record_id = "/".join((attempt.board, attempt.task_id, attempt.provider, where.session, key))
    if any(r.id == record_id for r in where.records):
        return None
    spent = {kind: counts.get(kind, 0) for kind in KINDS}
    cost, source = _priced(model, spent, where.prices)
    return _record(record_id, attempt, where.session, model, "message", spent, cost, source,
                   where.at)


def _cumulative(
    where: _Session, model: str, counts: Mapping[str, int], seen_cost: float | None
) -> Record:
    """A cumulative figure's record: its growth since the session's previous cumulative
    record, less what message records counted since (reasoning is never in a message)."""
    seen = {kind: counts.get(kind, 0) for kind in KINDS}
    before, since = _previous(
        [r for r in where.records if r.model == model], seen
    )
    said = before.tokens if before is not None else {}
    messages = [r for r in since if r.basis == "message"]
    counted = _sum(r.tokens for r in messages)
    grown = {kind: seen[kind] - said.get(kind, 0) for kind in KINDS}
    spent = _spent(grown, counted)
    cost, source = _cumulative_cost(model, spent, seen_cost, before, where.prices)
    record = _record(f"{uuid.uuid4().hex}", where.attempt, where.session, model, "cumulative",
                     spent, cost, source, where.at)
    record = replace(record, seen=Seen(seen, seen_cost))
    if seen_cost is not None and _holds_messages(grown, counted):
        record = replace(record, covers=tuple(r.id for r in messages))
    return record


def _holds_messages(grown: Mapping[str, int], counted: Mapping[str, int]) -> bool:
    """Whether the CLI's total holds the messages counted since its previous one (their
    input is in it), so its dollars hold theirs; a total that does not (an invocation
    killed before its result) leaves them unpriced."""
    return all(grown[k] >= counted[k] for k in INPUT_KINDS)


def _spent(grown: Mapping[str, int], counted: Mapping[str, int]) -> dict[str, int]:
    """The growth of each kind less what messages counted of it; reasoning, which no
    message counts, as it grew."""
    spent = {kind: max(0, grown[kind] - counted[kind]) for kind in COUNTED}
    spent["reasoning"] = max(0, grown["reasoning"])
    return spent


def _previous(
    same: Sequence[Record], seen: Mapping[str, int]
) -> tuple[Seen | None, Sequence[Record]]:
    """What the model's previous cumulative record saw (None when there is none, or the
    CLI's count began again: a session started afresh), and the records after it."""
    earlier = next((i for i in range(len(same) - 1, -1, -1)
                    if same[i].basis == "cumulative"), None)
    if earlier is None:
        return None, same
    before = same[earlier].seen
    if before is not None and any(seen[kind] < before.tokens.get(kind, 0) for kind in KINDS):
        before = None
    return before, same[earlier + 1:]


def _cumulative_cost(
    model: str,
    spent: Mapping[str, int],
    seen_cost: float | None,
    before: Seen | None,
    prices: Prices,
) -> tuple[float | None, str | None]:
    """The CLI's own dollars since its previous total, else the price table's."""
    if seen_cost is None:
        return _priced(model, spent, prices)
    paid = before.cost_usd if before is not None else None
    return max(0.0, seen_cost - (paid or 0.0)), "cli"


def _priced(
    model: str, spent: Mapping[str, int], prices: Prices
) -> tuple[float | None, str | None]:
    cost = price(model, spent, prices)
    return cost, None if cost is None else "prices"


def _record(
    record_id: str, attempt: Attempt, session: str, model: str, basis: Basis,
    spent: dict[str, int], cost: float | None, source: str | None, at: float,
) -> Record:
    return Record(
        id=record_id, at=at, day=day_of(at), board=attempt.board, task_id=attempt.task_id,
        run_id=attempt.run_id, attempt=attempt.attempt, provider=attempt.provider,
        model=model, session=session, basis=basis, tokens=spent, cost_usd=cost,
        cost_source=source, role=attempt.role,
    )


def _sum(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(KINDS, 0)
    for item in counts:
        for kind in KINDS:
            total[kind] += int(item.get(kind, 0))
    return total


def unsent(records: Iterable[Record], sent: Collection[str]) -> list[Record]:
    """The records the board has not confirmed taking: what to send (again)."""
    return [r for r in records if r.id not in sent]


def kept(records: Iterable[Record], sent: Collection[str], oldest_day: str) -> list[Record]:
    """The records the home keeps under retention: those of ``oldest_day`` or later, and
    every record the board has not confirmed, however old (the home's is its only copy)."""
    return [r for r in records if r.day >= oldest_day or r.id not in sent]


class Ledger:
    """The daemon's writer of the home's ledgers; one per process, safe across threads.

    Each board's records are read once and kept; appends go to the file first
    (fsynced), then to the kept list, so what a budget reads is what is durable.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._boards: dict[str, list[Record]] = {}
        self._sent: dict[str, set[str]] = {}

    def path(self, board: str) -> Path:
        return self.directory / f"{board}.jsonl"

    def sent_path(self, board: str) -> Path:
        """The ids of ``board``'s records its shared ledger confirmed taking, one a line."""
        return self.directory / f"{board}.sent"

    def unsent(self, board: str) -> list[Record]:
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
            files.write(self.path(board), b"".join(line(r) for r in keep))
            self._boards[board] = keep
            # A crash here leaves marks of records that are gone: never read again.
            held = sent & {r.id for r in keep}
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

    def records(self, board: str) -> list[Record]:
        with self._lock:
            return list(self._loaded(board))

    def _loaded(self, board: str) -> list[Record]:
        if board not in self._boards:
            self._boards[board] = read(self.path(board))
        return self._boards[board]

    def record(
        self, attempt: Attempt, report: UsageReport, prices: Prices, at: float
    ) -> list[Record]:
        """Attribute ``report`` to ``attempt`` and append what it adds, durably; the new
        records (none when the figure was counted already)."""
        with self._lock:
            book = self._loaded(attempt.board)
            history = [r for r in book if r.task_id == attempt.task_id]
            added = attribute(report, attempt, history, prices, at)
            if added:
                self._append(self.path(attempt.board), added)
                book.extend(added)
            return added

    def _append(self, path: Path, records: list[Record]) -> None:
        self._write_all(path, b"".join(line(record) for record in records), sync=True)

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
