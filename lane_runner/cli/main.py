"""The ``lane-runner`` command line.

Each command group lives in ``lane_runner/cli/commands/<group>.py`` and exposes
``register(subparsers)``; this module only assembles them and turns errors into
exit codes: 0 ok, 2 usage or validation error, 1 anything else (some commands
document more, e.g. ``recover`` exits 3 when work is left pending), and 70 for a bug
(an unexpected exception: one line on stderr, the traceback in the debug log).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from lane_runner import __version__, config, redact
from lane_runner.errors import LaneRunnerError, UsageError
from lane_runner.service import logs

COMMAND_MODULES = (
    "config_cmd",
    "board_cmd",
    "task_cmd",
    "run_cmd",
    "control_cmd",
    "demo_cmd",
    "journal_cmd",
    "status_cmd",
    "doctor_cmd",
    "logs_cmd",
)
DAEMON_COMMANDS = ("run",)  # their log is the operator's record: info by default

log = logging.getLogger("lane_runner")

#: Exit status of an unexpected exception (sysexits' EX_SOFTWARE).
INTERNAL_ERROR = 70


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so every error is one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lane-runner", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"lane-runner {__version__}")
    parser.add_argument(
        "--home",
        type=Path,
        help="the runner's home (default: $LANE_RUNNER_HOME or the XDG data dir)",
    )
    parser.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        help="stderr log lines: json (default under systemd) or text (default elsewhere)",
    )
    parser.add_argument(
        "--log-level",
        choices=logs.LEVELS,
        help="default: info for 'run', warning for every other command",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"lane_runner.cli.commands.{name}").register(subparsers)
    return parser


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def load_config(args: argparse.Namespace) -> config.Config:
    return config.load(args.home)


def main(argv: Sequence[str] | None = None) -> int:
    logs.setup("text", "warning")
    try:
        args = build_parser().parse_args(argv)
        default_level = "info" if args.command in DAEMON_COMMANDS else "warning"
        logs.setup(
            logs.choose_format(args.log_format, os.environ, sys.stderr.isatty()),
            args.log_level or default_level,
        )
        result: int | None = args.handler(args)
        return result or 0
    except LaneRunnerError as error:
        print(f"lane-runner: {redact.text(str(error))}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - the last line of defence, see below
        # A bug must still end in one line an operator can act on, not a traceback
        # that may quote a URL with its password; the traceback goes to the debug log.
        log.debug("unexpected error", exc_info=True)
        print(
            f"lane-runner: internal error: {type(error).__name__}: {redact.text(str(error))}; "
            "this is a bug: run again with --log-level debug for the traceback and report it",
            file=sys.stderr,
        )
        return INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
