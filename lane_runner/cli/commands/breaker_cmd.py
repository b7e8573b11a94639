"""``lane-runner health``: what the storm breaker marks broken, and clearing it.

The module is named for what the command shows (the breaker's marks); the command keeps
its name, ``health``, which operators script against.

The breaker (``service/breaker.py``) stops claims for a provider, a workspace or a
board after the same failure hit several tasks. Once the cause is fixed, ``health
clear`` lifts it at once instead of waiting for the next probe; a running daemon sees it
at its next turn.
"""

from __future__ import annotations

import argparse
from typing import Any

from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table, printable, timestamp
from lane_runner.errors import UsageError
from lane_runner.home import Home
from lane_runner.service import breaker


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "health", help="what the storm breaker marks broken; clear it once fixed"
    )
    commands = parser.add_subparsers(dest="health_command", required=True)
    show = commands.add_parser(
        "show", help="list the providers, workspaces and boards marked broken"
    )
    add_json_flag(show)
    show.set_defaults(handler=show_broken)
    clear = commands.add_parser("clear", help="lift the breaker (of one scope, or all)")
    clear.add_argument(
        "scope",
        nargs="?",
        help="provider:<name>, workspace:<board>:<path> or board:<slug> ('health show' lists "
        "them)",
    )
    add_json_flag(clear)
    clear.set_defaults(handler=clear_broken)


def _document(trip: breaker.Trip) -> dict[str, Any]:
    return {
        **trip.to_dict(),
        "tripped_at": timestamp(trip.tripped_at),
        "probe_at": timestamp(trip.probe_at),
    }


def show_broken(args: argparse.Namespace) -> int:
    trips = breaker.read(Home(load_config(args).home).breaker_file)
    if args.json:
        print_json({"broken": [_document(trip) for trip in trips.values()]})
        return 0
    if not trips:
        print("nothing marked broken")
        return 0
    print_table(
        ("scope", "tasks", "since", "next probe", "failure"),
        [
            (t.scope, t.count, timestamp(t.tripped_at), timestamp(t.probe_at), printable(t.reason))
            for t in trips.values()
        ],
    )
    return 0


def clear_broken(args: argparse.Namespace) -> int:
    path = Home(load_config(args).home).breaker_file
    if args.scope is not None and args.scope not in breaker.read(path):
        known = ", ".join(breaker.read(path)) or "none"
        raise UsageError(f"{args.scope!r} is not marked broken (marked broken: {known})")
    lifted = breaker.clear(path, args.scope)
    if args.json:
        print_json({"cleared": [_document(trip) for trip in lifted]})
    elif lifted:
        for trip in lifted:
            print(
                f"cleared {trip.scope} (marked broken after {trip.count} tasks failed: "
                f"{', '.join(trip.tasks)}; one it blocked stays blocked until 'lane-runner "
                "task retry')"
            )
    else:
        print("nothing marked broken")
    return 0
