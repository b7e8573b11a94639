"""``lane-runner usage``: what the tasks spent, from the usage ledger (never the logs).

Totals by task, board, provider, model, day or role (``--by``, several allowed; a role
is an implementer's turns or a reviewer's), over a period of UTC days (``--since`` /
``--until``), for one board or task or all. A board
with a shared ledger (the SQL boards) gives every runner's spend on it; this home's
records count too, by id, so what it has not sent yet is not missed.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Iterable
from contextlib import closing
from typing import Any

from lane_runner import clock
from lane_runner.board import open_store
from lane_runner.board.base import BoardUnavailable, Store
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table
from lane_runner.errors import NotFound, UsageError
from lane_runner.home import Home
from lane_runner.names import check_name
from lane_runner.usage import record, share, spend
from lane_runner.usage.record import Record

#: What a row shows per group, in the table.
HEADERS = ("input", "cached", "cache write", "output", "reasoning", "tokens", "cost $")


def register(subparsers: Any) -> None:
    usage = subparsers.add_parser(
        "usage", help="tokens and dollars spent, by task, board, provider, model, day or role"
    )
    usage.add_argument("--board", help="one board (default: every board of this home)")
    usage.add_argument("--task", help="one task (with --board)")
    usage.add_argument(
        "--by",
        action="append",
        choices=spend.DIMENSIONS,
        help="group by this (repeatable; default: board)",
    )
    usage.add_argument("--since", help="first UTC day: YYYY-MM-DD, or Nd for the last N days")
    usage.add_argument("--until", help="last UTC day: YYYY-MM-DD (default: today)")
    add_json_flag(usage)
    usage.set_defaults(handler=show_usage)


def day(text: str, today: datetime.date, option: str) -> datetime.date:
    """``YYYY-MM-DD``, or ``Nd``: the day N - 1 days before today (``1d`` is today)."""
    text = text.strip()
    if text.endswith("d") and text[:-1].isdigit() and int(text[:-1]) >= 1:
        return today - datetime.timedelta(days=int(text[:-1]) - 1)
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a UTC day YYYY-MM-DD or Nd "
                         "(the last N days)") from None


def records(
    store: Store, home: Home, board: str | None, since: str | None
) -> list[Record]:
    """Every ledger record of ``board`` (else of every board of the store or the home)
    from UTC day ``since`` on, where the board keeps them: its shared ledger (every
    runner's spend), merged by id with this home's own (which it may not hold yet)."""
    if board is not None:
        slugs = [check_name("board", board)]
    else:
        mine = sorted(home.usage.glob("*.jsonl")) if home.usage.is_dir() else []
        slugs = sorted({path.stem for path in mine} | set(_board_slugs(store)))
    found: list[Record] = []
    for slug in slugs:
        at_home = record.read(home.usage_file(slug))
        found += spend.Spend.of(_shared(store, slug, since), at_home).records
    return found


def _board_slugs(store: Store) -> list[str]:
    try:
        return list(store.board_slugs())
    except BoardUnavailable as error:
        print(f"the boards cannot be read now ({error}); this home's usage only",
              file=sys.stderr)
        return []


def _shared(store: Store, slug: str, since: str | None) -> list[Record]:
    """The board's shared ledger; none for a board this store does not have (a home
    ledger outlives its board) and, said on stderr, for one that cannot be read now."""
    try:
        return share.on_board(store.board(slug), since_day=since)
    except NotFound:
        return []
    except BoardUnavailable as error:
        print(f"board {slug} cannot be read now ({error}); this home's usage of it only",
              file=sys.stderr)
        return []


def selected(
    every: Iterable[Record], task: str | None, since: str | None, until: str | None
) -> list[Record]:
    return [
        r for r in every
        if (task is None or r.task_id == task)
        and (since is None or r.day >= since)
        and (until is None or r.day <= until)
    ]


def show_usage(args: argparse.Namespace) -> int:
    if args.task and not args.board:
        raise UsageError("--task needs --board: task ids are per board")
    cfg = load_config(args)
    home = Home(cfg.home)
    since, until = _days(args)
    with closing(open_store(cfg)) as store:
        chosen = selected(records(store, home, args.board, since), args.task, since, until)
    by = tuple(dict.fromkeys(args.by or ["board"]))
    rows = spend.summarize(chosen, by)
    total = spend.total(chosen).to_dict()
    if args.json:
        print_json({"since": since, "until": until, "by": list(by), "rows": rows,
                    "total": total})
        return 0
    print_table((*by, *HEADERS), [(*(row[name] for name in by), *_figures(row)) for row in rows])
    print(f"\ntotal: {total['total_tokens']:,} tokens, ${total['cost_usd']:.4f}"
          + ("" if total["cost_complete"] else
             f" (+ {total['unpriced_records']} record(s) of unknown cost: add their model "
             "to prices)"))
    return 0


def _days(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``--since`` and ``--until`` as ISO days (None when not given); refused when the
    first is after the second."""
    today = datetime.datetime.fromtimestamp(clock.now(), datetime.UTC).date()
    since = day(args.since, today, "--since").isoformat() if args.since else None
    until = day(args.until, today, "--until").isoformat() if args.until else None
    if since and until and since > until:
        raise UsageError(f"--since {since} is after --until {until}")
    return since, until


def _figures(row: dict[str, Any]) -> tuple[Any, ...]:
    tokens = row["tokens"]
    cost = f"{row['cost_usd']:.4f}" + ("" if row["cost_complete"] else "+?")
    return (tokens["input"], tokens["cached_input"], tokens["cache_write"], tokens["output"],
            tokens["reasoning"], row["total_tokens"], cost)
