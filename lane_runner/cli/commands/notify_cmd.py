"""``lane-runner notify ls|test``: the board's notification outbox (what went, what waits,
what was dropped and why), and a test message to each configured URL
(docs/notifications.md). URLs are shown as their scheme and a hash, never whole."""

from __future__ import annotations

import argparse
from contextlib import closing
from dataclasses import asdict
from typing import Any

from lane_runner.board import open_store
from lane_runner.board.base import Outbox
from lane_runner.board.model import NoticeState
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table, timestamp
from lane_runner.cli.tasks import only_board
from lane_runner.config import people
from lane_runner.errors import UsageError
from lane_runner.notifications import sender
from lane_runner.notifications.dispatch import Route
from lane_runner.notifications.notices import Kind, Message


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("notify", help="the notification outbox; a test message")
    commands = parser.add_subparsers(dest="notify_command", metavar="ACTION", required=True)
    listing = commands.add_parser("ls", help="the board's latest notifications and their fate")
    listing.add_argument("--board", help="the board (needed when the home has several)")
    listing.add_argument("--state", choices=[state.value for state in NoticeState])
    listing.add_argument("--limit", type=int, default=50)
    add_json_flag(listing)
    listing.set_defaults(handler=list_notices)
    test = commands.add_parser("test", help="send a test message to each of a board's URLs")
    test.add_argument("--board", help="the board (needed when the home has several)")
    add_json_flag(test)
    test.set_defaults(handler=send_test)


def list_notices(args: argparse.Namespace) -> int:
    with closing(open_store(load_config(args))) as store:
        board = store.board(only_board(store, args.board))
        if not isinstance(board, Outbox):
            raise UsageError(f"board {board.slug} keeps no notification outbox (a hosted board)")
        state = NoticeState(args.state) if args.state else None
        found = board.notices(state, max(1, min(args.limit, 1000)))
    rows = [{**asdict(n), "at": timestamp(n.at), "next_at": timestamp(n.next_at),
             "sent_at": timestamp(n.sent_at)} for n in found]
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ("id", "kind", "task", "state", "attempts", "at", "error"),
        [(n.data.get("id", n.id), n.kind, n.task_id, n.state.value, n.attempts,
          timestamp(n.at), n.error) for n in found],
    )
    return 0


def send_test(args: argparse.Namespace) -> int:
    """One message to each URL the board's ``notify`` entry names, now (not through the
    outbox: a test is no event); exit 1 when any failed."""
    cfg = load_config(args)
    sender.require()
    with closing(open_store(cfg)) as store:
        slug = only_board(store, args.board)
    route = Route.of(cfg, slug)
    if route is None:
        raise UsageError(f"no notify entry for board {slug} (nor '*'): see docs/notifications.md")
    message = Message(
        id=f"{slug}/test", kind=Kind.DONE, board=slug, task_id=None, title="",
        outcome="test", line="a test message from 'lane-runner notify test'", cost_usd=None,
        more=f"lane-runner notify ls --board {slug}",
    )
    results = []
    for url in route.urls:
        try:
            error = sender.send(url, message)
        except sender.Unsendable as unsendable:
            error = str(unsendable)
        results.append({"url": people.shown_url(url), "sent": error is None, "error": error})
    if args.json:
        print_json(results)
    else:
        for result in results:
            said = "sent" if result["sent"] else f"failed: {result['error']}"
            print(f"{result['url']}: {said}")
    return 0 if all(result["sent"] for result in results) else 1
