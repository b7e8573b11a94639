"""``lane-runner journal ls|show|verify``: what the journal holds and what recovery will do.

Read-only. Entries are pinned and judged exactly as recovery would judge them
(``Journal.entries``); the plan for each comes from ``inspection.explain``.
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson

from journal import Entry, Journal
from lane_runner import display
from lane_runner.board import open_store, rules
from lane_runner.board.base import BoardUnavailable, Store
from lane_runner.board.model import IMPLEMENT_ROLE
from lane_runner.cli import inspection
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import duration, print_json, print_table, printable, timestamp
from lane_runner.errors import LaneRunnerError, NotFound, UsageError
from lane_runner.home import Home

STATES = (
    "pending",
    "prepared",
    "committed",
    "conflict",
    "staging",
    "temp",
    "lane-state",
    "candidate",
    "provider-result",
    "malformed",
    "other",
    inspection.DIAGNOSTIC,
    "invalid",
)
MAX_SHOWN_BYTES = 1 << 20
EXIT_ATTENTION = 1


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("journal", help="inspect the result journal (read-only)")
    commands = group.add_subparsers(dest="journal_command", metavar="ACTION", required=True)

    listing = commands.add_parser("ls", help="every journal entry and quarantine diagnostic")
    listing.add_argument("--board", help="one board (default: all)")
    listing.add_argument("--state", choices=STATES, help="only this kind, or 'invalid'")
    add_json_flag(listing)
    listing.set_defaults(handler=list_entries)

    show = commands.add_parser(
        "show", help="an entry, the board's view of its run, and what recover would do"
    )
    target = show.add_mutually_exclusive_group(required=True)
    target.add_argument("path", nargs="?", type=Path, help="a journal file")
    target.add_argument("--task", help="every entry of this task")
    show.add_argument("--board", help="with --task: one board (default: all)")
    add_json_flag(show)
    show.set_defaults(handler=show_entries)

    verify = commands.add_parser(
        "verify",
        help="exit 0 when nothing is pending, prepared, staged or invalid; 1 listing them",
    )
    add_json_flag(verify)
    verify.set_defaults(handler=verify_journal)


def _entries(home: Home, board: str | None) -> list[Entry]:
    unsafe = home.unsafe_directories()
    if unsafe:
        raise LaneRunnerError(
            "the journal is not read through links: " + "; ".join(unsafe)
            + " (move each aside and let lane-runner recreate the directory)"
        )
    try:
        return Journal(home.lanes).entries(board)
    except FileNotFoundError:
        raise NotFound(f"no journal directory for board {board!r} under {home.lanes}") from None
    except ValueError as error:
        raise UsageError(str(error)) from None


def entry_document(entry: Entry, now: float) -> dict[str, Any]:
    return {
        "path": str(entry.path),
        "board": entry.board,
        "task_id": entry.task_id,
        "run_id": entry.run_id,
        "state": entry.kind,
        "file_kind": entry.file_kind,
        "age_seconds": round(now - entry.mtime, 3) if entry.mtime else None,
        "modified_at": timestamp(entry.mtime) if entry.mtime else None,
        "size": entry.size,
        "valid": entry.valid,
        "reason": entry.reason,
        "digest": entry.digest,
    }


def _print_entries(documents: list[dict[str, Any]]) -> None:
    rows = [
        (
            doc["board"],
            doc["task_id"],
            doc["run_id"],
            doc["state"],
            duration(doc["age_seconds"]),
            doc["size"],
            "valid" if doc["valid"] else f"INVALID: {doc['reason']}",
            (doc["digest"] or "")[:12] or None,
            Path(doc["path"]).name,
        )
        for doc in documents
    ]
    print_table(("board", "task", "run", "state", "age", "size", "valid", "digest", "name"), rows)


def _matches(entry: Entry, state: str | None) -> bool:
    if state is None:
        return True
    return not entry.valid if state == "invalid" else entry.kind == state


def list_entries(args: argparse.Namespace) -> int:
    home = Home(load_config(args).home)
    now = time.time()
    documents = [
        entry_document(entry, now)
        for entry in _entries(home, args.board)
        if _matches(entry, args.state)
    ]
    if args.json:
        print_json({"entries": documents})
    elif documents:
        _print_entries(documents)
    else:
        print("no journal entries")
    return 0


# -- show --------------------------------------------------------------------------


def _payload(path: Path) -> Any:
    """The entry's JSON for display, or None: read without following links, bounded."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as handle:
            data = handle.read(MAX_SHOWN_BYTES + 1)
        return orjson.loads(data) if len(data) <= MAX_SHOWN_BYTES else None
    except (OSError, orjson.JSONDecodeError):
        return None


def board_view(store: Store, board: str, task_id: str, result: Any) -> inspection.BoardView:
    """The board's side of a task's runs, as ``inspection.explain`` needs it."""
    try:
        lane = store.board(board)
        task = lane.get_task(task_id)
        # The task's own runs: a review run never completes it (board/sql/reviews.py)
        ended = [run.id for run in lane.runs(task_id)
                 if run.ended_at is not None and run.role == IMPLEMENT_ROLE]
    except NotFound:
        return inspection.BoardView()
    except BoardUnavailable as error:
        return inspection.BoardView(error=str(error))
    matches = isinstance(result, dict) and rules.same_result(task.result, result)
    return inspection.BoardView(
        task_status=task.status,
        current_run_id=task.current_run_id,
        completed_run_id=task.completed_run_id,
        latest_ended_run_id=max(ended, default=None),
        result_matches=matches,
    )


def _explained(entry: Entry, store: Store, now: float) -> dict[str, Any]:
    document = entry_document(entry, now)
    payload = _payload(entry.path)
    record = payload if isinstance(payload, dict) else {}
    task_id = entry.task_id or record.get("task_id")
    view = None
    if entry.kind in (*inspection.CARRY_RESULT, "staging") and isinstance(task_id, str):
        view = board_view(store, entry.board, task_id, record.get("result"))
    staged_state = record.get("state") if entry.kind == "staging" else None
    plan = inspection.explain(entry, view, staged_state)
    document["record"] = payload
    document["board_view"] = view.as_json() if view is not None else None
    document["recover"] = {"action": plan.action, "why": plan.why}
    return document


def _selected(home: Home, args: argparse.Namespace) -> list[Entry]:
    if args.task is not None:
        found = [e for e in _entries(home, args.board) if e.task_id == args.task]
        if not found:
            raise NotFound(f"no journal entries for task {args.task!r}")
        return found
    wanted = Path(os.path.abspath(args.path))
    found = [e for e in _entries(home, None) if Path(os.path.abspath(e.path)) == wanted]
    if not found:
        raise NotFound(f"{args.path} is not an entry of the journal under {home.lanes}")
    return found


def show_entries(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    home = Home(cfg.home)
    selected = _selected(home, args)
    now = time.time()
    with closing(open_store(cfg)) as store:
        documents = [_explained(entry, store, now) for entry in selected]
    if args.json:
        print_json({"entries": documents})
        return 0
    for index, doc in enumerate(documents):
        if index:
            print()
        _print_explained(doc)
    return 0


def _print_explained(doc: dict[str, Any]) -> None:
    """One entry for a person. Every line passes through ``printable``: a worker's summary,
    a board's error or a planted file name may hold terminal escapes (``--json`` keeps
    them exact); the summary is bounded, ``--json`` has it whole."""
    for line in _explained_lines(doc):
        print(printable(line))


def _explained_lines(doc: dict[str, Any]) -> list[str]:
    validity = "valid" if doc["valid"] else f"INVALID ({doc['reason']})"
    lines = [
        f"{doc['path']}",
        f"  state:    {doc['state']}, {validity}, {doc['size']} bytes, {doc['file_kind']}",
        f"  run:      {doc['board']}/{doc['task_id'] or '-'} run {doc['run_id'] or '-'}",
        f"  modified: {doc['modified_at'] or '-'} ({duration(doc['age_seconds'])} ago)",
    ]
    if doc["digest"]:
        lines.append(f"  digest:   {doc['digest']}")
    record = doc["record"]
    if isinstance(record, dict) and "summary" in record:
        summary = display.clipped(str(record["summary"]), display.MAX_REASON_CHARS)
        lines.append(f"  summary:  {summary}")
    view = doc["board_view"]
    if view is not None:
        lines.append(f"  board:    {_board_words(view)}")
    lines.append(f"  recover:  {doc['recover']['action']}: {doc['recover']['why']}")
    return lines


def _board_words(view: dict[str, Any]) -> str:
    """What the board says of the entry's task: unavailable, no such task, or its runs."""
    if view["error"]:
        return f"unavailable: {view['error']}"
    if view["task_status"] is None:
        return "no such task"
    return (
        f"task {view['task_status']}, current run {view['current_run_id']}, "
        f"completed by run {view['completed_run_id']}, "
        f"last ended run {view['latest_ended_run_id']}, "
        f"same result: {'yes' if view['result_matches'] else 'no'}"
    )


# -- verify ------------------------------------------------------------------------


def verify_journal(args: argparse.Namespace) -> int:
    home = Home(load_config(args).home)
    now = time.time()
    entries = _entries(home, None)
    attention = [entry_document(e, now) for e in entries if inspection.needs_attention(e)]
    quarantined = sum(entry.kind == inspection.DIAGNOSTIC for entry in entries)
    if args.json:
        print_json({"clean": not attention, "attention": attention, "quarantined": quarantined})
    elif attention:
        _print_entries(attention)
        print(
            f"{len(attention)} entr{'y needs' if len(attention) == 1 else 'ies need'} recovery; "
            "see 'lane-runner journal show PATH', then run 'lane-runner recover'"
        )
    else:
        print(f"journal clean ({len(entries)} entries, {quarantined} quarantine diagnostics)")
    return EXIT_ATTENTION if attention else 0
