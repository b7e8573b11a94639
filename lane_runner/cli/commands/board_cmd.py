"""``lane-runner board create|ls|delete``: the boards tasks are filed on."""

from __future__ import annotations

import argparse
from contextlib import closing
from typing import Any

from lane_runner.board import open_store
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import Status
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("board", help="create, list and delete boards")
    commands = group.add_subparsers(dest="board_command", metavar="ACTION", required=True)
    create = commands.add_parser("create", help="create an empty board")
    create.add_argument("name", help="the board slug: letters, digits, '_', '.', '-'")
    add_json_flag(create)
    create.set_defaults(handler=create_board)
    listing = commands.add_parser("ls", help="every board with its task counts")
    add_json_flag(listing)
    listing.set_defaults(handler=list_boards)
    delete = commands.add_parser(
        "delete", help="remove a board whose tasks are all archived, with everything on it"
    )
    delete.add_argument("name", help="the board slug")
    delete.add_argument(
        "--force", action="store_true", help="archive its tasks first (never a running one)"
    )
    add_json_flag(delete)
    delete.set_defaults(handler=delete_board)


def create_board(args: argparse.Namespace) -> int:
    with closing(open_store(load_config(args, needs_home=False))) as store:
        board = store.create_board(args.name)
        counts = board.counts()
    if args.json:
        print_json({"board": board.slug, "available": True, "counts": counts, "error": None})
    else:
        print(f"created board {board.slug}")
    return 0


def list_boards(args: argparse.Namespace) -> int:
    """Lists every board; a broken one is shown as unavailable, not a reason to fail."""
    entries: list[dict[str, Any]] = []
    with closing(open_store(load_config(args))) as store:
        for slug in store.board_slugs():
            try:
                counts: dict[str, int] | None = store.board(slug).counts()
                error = None
            except BoardUnavailable as unavailable:
                counts, error = None, str(unavailable)
            entries.append(
                {"board": slug, "available": error is None, "counts": counts, "error": error}
            )
    if args.json:
        print_json(entries)
        return 0
    statuses = [status.value for status in Status]
    rows = [
        (entry["board"], *(entry["counts"][s] for s in statuses), "")
        if entry["available"]
        else (entry["board"], *(None for _ in statuses), "unavailable (see 'board ls --json')")
        for entry in entries
    ]
    print_table(("board", *statuses, "note"), rows)
    return 0


def delete_board(args: argparse.Namespace) -> int:
    """One transaction empties the board (refused while anything runs), then it goes."""
    with closing(open_store(load_config(args))) as store:
        deleted = store.delete_board(args.name, force=args.force)
    if args.json:
        print_json({"board": args.name, "deleted": True, "tasks_deleted": deleted})
    else:
        print(f"deleted board {args.name} and its {deleted} task(s)")
    return 0
