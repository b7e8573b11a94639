"""The ``lane-runner`` command line.

Each command group lives in ``lane_runner/cli/commands/<group>.py`` and exposes
``register(subparsers)``; this module only assembles them and turns errors into
exit codes: 0 ok, 2 usage or validation error, 1 anything else (some commands
document more: ``recover`` exits 3 when work is left pending, ``run --until-idle`` 3
when work was left waiting and 4 when some task ended blocked; docs/commands.md), 141 when the
reader of the output went away (``| head``), and 70 for a bug (an unexpected
exception: one line on stderr, the traceback in the debug log).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, Protocol

from lane_runner import __version__, redact, suggest
from lane_runner.cli import output
from lane_runner.cli.commands import (
    board_cmd,
    breaker_cmd,
    cleanup_cmd,
    config_cmd,
    control_cmd,
    demo_cmd,
    doctor_cmd,
    evidence_cmd,
    journal_cmd,
    logs_cmd,
    notify_cmd,
    run_cmd,
    status_cmd,
    task_cmd,
    usage_cmd,
    web_cmd,
)
from lane_runner.errors import LaneRunnerError, UsageError
from lane_runner.names import PROVIDERS
from lane_runner.service import logs

#: The command groups, in the order ``--help`` lists them.
COMMAND_MODULES: tuple[CommandModule, ...] = (
    config_cmd,
    board_cmd,
    task_cmd,
    evidence_cmd,
    run_cmd,
    control_cmd,
    demo_cmd,
    journal_cmd,
    cleanup_cmd,
    status_cmd,
    usage_cmd,
    doctor_cmd,
    breaker_cmd,
    logs_cmd,
    web_cmd,
    notify_cmd,
)


class CommandModule(Protocol):
    """A module of ``cli/commands/``: it adds its command group to the parser."""

    def register(self, subparsers: Any) -> None: ...


DAEMON_COMMANDS = ("run",)  # their log is the operator's record: info by default
PROG = "lane-runner"
DESCRIPTION = (
    f"Run coding tasks from a task board through the agent CLIs ({', '.join(PROVIDERS)}), "
    "with a crash-safe result journal."
)
EPILOG = (
    "Options --home, --log-format and --log-level may come before or after the command. "
    "Every command takes --json. Exit status: 0 ok, 1 failed, 2 bad input (nothing "
    "written), 141 the reader of the output went away, 70 a bug; 'run --until-idle': 4 "
    "some task ended blocked or gave up, 3 work was left waiting (docs/commands.md)."
)

log = logging.getLogger("lane_runner")

#: Exit status of an unexpected exception (sysexits' EX_SOFTWARE).
INTERNAL_ERROR = 70


def _command_of(prog: str) -> str:
    """``lane-runner task show`` -> ``task show``: what the user typed after the program."""
    return prog.removeprefix(PROG).strip()


def _help_hint(command: str) -> str:
    return f"see '{PROG} {command} --help'" if command else f"see '{PROG} --help'"


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so every error is one line:
    the command it concerns, what was wrong, where help is."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check of a choice (a command, an action, ``--status``), saying the
        closest one when the value is not among them (Python 3.14's ``suggest_on_error``
        does the same; older ones do not)."""
        choices = action.choices
        if choices is not None and value not in choices:
            names = [str(choice) for choice in choices]
            close = suggest.closest(str(value), names)
            meant = f"; did you mean {close!r}?" if close is not None else ""
            raise argparse.ArgumentError(
                action,
                f"invalid choice: {value!r}{meant} (choose from {', '.join(dict.fromkeys(names))})",
            )
        super()._check_value(action, value)

    def error(self, message: str) -> NoReturn:
        command = _command_of(self.prog)
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message} ({_help_hint(command)})")


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options every command takes, before or after its name. On a subcommand they
    default to nothing (``SUPPRESS``), so a value given before the command stands."""
    default: Any = argparse.SUPPRESS if suppress else None
    present = parser._option_string_actions  # argparse has no public lookup
    if "--home" not in present:  # demo names its own --home (the same dest)
        parser.add_argument(
            "--home",
            type=Path,
            default=default,
            help="the runner's home (default: $LANE_RUNNER_HOME or the XDG data dir)",
        )
    parser.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default=default,
        help="stderr log lines: json (default under systemd) or text (default elsewhere)",
    )
    parser.add_argument(
        "--log-level",
        choices=logs.LEVELS,
        default=default,
        help="default: info for 'run', warning for every other command",
    )


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    for action in parser._actions:  # argparse has no public lookup
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def commands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[argparse.ArgumentParser, argparse._SubParsersAction[Any] | None]]:
    """Every parser below ``parser`` (each once, aliases or not), with its subcommands."""
    group = _subcommands(parser)
    if group is None:
        return
    seen: set[int] = set()
    for child in group.choices.values():
        if id(child) not in seen:
            seen.add(id(child))
            yield child, _subcommands(child)
            yield from commands(child)


def _missing_action(
    parser: argparse.ArgumentParser, group: argparse._SubParsersAction[Any]
) -> Callable[[argparse.Namespace], int]:
    command = _command_of(parser.prog)
    names = ", ".join(dict.fromkeys(group.choices))
    what = "an action" if command else "a command"

    def handler(args: argparse.Namespace) -> int:
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}name {what}: {names} ({_help_hint(command)})")

    return handler


def _finish(parser: argparse.ArgumentParser) -> None:
    """Global options on every command; a missing action named by our own handler (not
    argparse's required check, which would fire before an unknown option is named)."""
    for each in (parser, *(child for child, _ in commands(parser))):
        group = _subcommands(each)
        if each is not parser:
            _global_options(each, suppress=True)
        if group is not None:
            group.required = False
            each.set_defaults(handler=_missing_action(each, group))
        else:
            each.set_defaults(command=_command_of(each.prog))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"lane-runner {__version__}")
    _global_options(parser, suppress=False)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    _finish(parser)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, or UsageError naming the first one nobody takes and the command
    it was given to."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = args.command or ""
        where = f"{command}: " if command else ""
        raise UsageError(
            f"{where}unrecognized argument {unknown[0]!r} ({_help_hint(command)})"
        )
    return args


def _internal_error(error: BaseException) -> int:
    # A bug must still end in one line an operator can act on, not a traceback
    # that may quote a URL with its password; the traceback goes to the debug log.
    log.debug("unexpected error", exc_info=error)
    print(
        f"lane-runner: internal error: {type(error).__name__}: {redact.text(str(error))}; "
        "this is a bug: run again with --log-level debug for the traceback and report it",
        file=sys.stderr,
    )
    return INTERNAL_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    logs.setup("text", "warning")
    try:
        args = parse(build_parser(), argv)
        default_level = "info" if args.command in DAEMON_COMMANDS else "warning"
        logs.setup(
            logs.choose_format(args.log_format, os.environ, sys.stderr.isatty()),
            args.log_level or default_level,
        )
        result: int | None = args.handler(args)
        sys.stdout.flush()  # here, so a reader that went away is met below, not at exit
        return result or 0
    except BrokenPipeError as error:
        # The one place for every command: the reader of our output went away
        # (``| head``). Quiet, as git and kubectl are, with the shell's SIGPIPE status.
        if not output.reader_gone():
            return _internal_error(error)  # another pipe (a socket, a child): a real bug
        output.discard_stdout()
        return output.READER_GONE
    except LaneRunnerError as error:
        print(f"lane-runner: {redact.text(str(error))}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - the last line of defence
        return _internal_error(error)


if __name__ == "__main__":
    sys.exit(main())
