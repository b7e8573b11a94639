"""What the commands' arguments share: the ``--json`` flag, the configuration the
global options name, and argument types that check a value where argparse can name
the option it came with.

A bad number is refused by the parser as ``argument --goal-turns: at least 1, not 0``:
the option, the rule and the value, before anything is opened or written.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from lane_runner import config
from lane_runner.errors import NotFound


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


class HomeNotFound(NotFound):
    """The home a command reads does not exist (exit 2, as any name not found)."""


def load_config(args: argparse.Namespace, *, needs_home: bool = True) -> config.Config:
    """The configuration of the home ``--home`` names (else the default home).

    A command that only reads (``task ls``, ``status``...) refuses a home that does not
    exist, naming it and where its path came from: a mistyped ``--home`` would otherwise
    show an empty world, or be created by the read. Commands that make a home (``run``,
    ``board create``) or report on a missing one (``doctor``, ``config show``) pass
    ``needs_home=False``.
    """
    cfg = config.load(args.home)
    if needs_home and not cfg.home.is_dir():
        origin = "the --home option" if args.home else config.default_home_source()
        raise HomeNotFound(
            f"no lane-runner home at {cfg.home} (from {origin}): check the path, or make "
            "the home with 'lane-runner board create NAME' (or 'lane-runner run')"
        )
    return cfg


def whole(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer from ``minimum`` (to ``maximum``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a whole number, not {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            rule = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
            raise argparse.ArgumentTypeError(f"{rule}, not {value}")
        return value

    return parse


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    return _positive(text, "seconds", "a number of seconds")


def dollars(text: str) -> float:
    """A positive, finite amount of US dollars."""
    return _positive(text, "dollars", "dollars such as 2.50")


def _positive(text: str, unit: str, asked: str) -> float:
    """``text`` as a positive, finite number of ``unit``; ``asked`` says what was wanted."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{asked}, not {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"more than 0 {unit}, not {text}")
    return value
