"""``lane-runner demo``: the quick start."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lane_runner.cli import demo
from lane_runner.cli.arguments import add_json_flag


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="run eight tasks through the daemon, with a crash and a recovery"
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=argparse.SUPPRESS,
        help="an empty or new directory for the demo (default: a temporary one)",
    )
    parser.add_argument(
        "--simulated",
        action="store_true",
        help="use the bundled simulated CLIs even where the real ones are installed",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the demo's home to inspect it (by default it is removed at the end)",
    )
    add_json_flag(parser)
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    return demo.run(args.home, simulated=args.simulated, as_json=args.json, keep=args.keep)
