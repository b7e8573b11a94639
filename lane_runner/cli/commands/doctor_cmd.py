"""``lane-runner doctor``: each check pass / warn / fail with a one-line fix."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lane_runner.cli import doctor
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.checks import exit_status, worst
from lane_runner.cli.output import print_json, print_table
from lane_runner.home import Home
from lane_runner.service.workerpool import probe_user

EPILOG = (
    "exit status: 0 when no check failed (warnings are printed), 1 when one failed "
    "(with --strict also when one warned), 2 for a usage error"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor", help="is this machine fit to run lane-runner?", epilog=EPILOG
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    parser.add_argument(
        "--fix",
        action="store_true",
        help="first narrow the home's wider modes (directories 0700, files 0600)",
    )
    add_json_flag(parser)
    parser.set_defaults(handler=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    cfg = load_config(args, needs_home=False)  # a missing home is one of its checks
    if args.fix:
        for line in doctor.narrow_modes(Home(cfg.home), probe_user(cfg)):
            print(f"fixed {line}", file=sys.stderr)
    checks = doctor.run_all(cfg)
    status = exit_status(checks, args.strict)
    if args.json:
        print_json(
            {
                "worst": str(worst(checks)),
                "exit_status": status,
                "checks": [
                    {"name": c.name, "level": str(c.level), "detail": c.detail, "fix": c.fix}
                    for c in checks
                ],
            }
        )
        return status
    print_table(
        ("result", "check", "detail", "fix"),
        [(str(c.level).upper(), c.name, c.detail, c.fix or None) for c in checks],
    )
    print(f"worst: {worst(checks)}")
    return status
