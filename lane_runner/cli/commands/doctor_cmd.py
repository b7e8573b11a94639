"""``lane-runner doctor``: each check pass / warn / fail with a one-line fix."""

from __future__ import annotations

import argparse
from typing import Any

from lane_runner.cli import doctor
from lane_runner.cli.main import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table

EPILOG = (
    "exit status: 0 when no check failed (warnings are printed), 1 when one failed "
    "(with --strict also when one warned), 2 for a usage error"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor", help="is this machine fit to run lane-runner?", epilog=EPILOG
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    add_json_flag(parser)
    parser.set_defaults(handler=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    checks = doctor.run_all(load_config(args))
    status = doctor.exit_status(checks, args.strict)
    if args.json:
        print_json(
            {
                "worst": str(doctor.worst(checks)),
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
    print(f"worst: {doctor.worst(checks)}")
    return status
