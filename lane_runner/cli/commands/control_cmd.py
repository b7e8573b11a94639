"""``lane-runner pause`` and ``resume``: stop and restart claiming, for maintenance.

A runner's pause is a file in its home (``service/pause.py``): the daemon sees it
at the next turn of its loop, a restart keeps it, and running work goes on to
its end. A board's pause (``--board``) is stored on the board, so every runner of
a shared board stops claiming from it. ``pause --wait`` is the drain: it returns
once nothing runs any more (on this runner, or on the board from any runner).
"""

from __future__ import annotations

import argparse
import getpass
import os
import time
from collections.abc import Callable
from contextlib import closing
from typing import Any

from lane_runner.board import open_store
from lane_runner.cli.arguments import add_json_flag, load_config, seconds
from lane_runner.cli.output import print_json, timestamp
from lane_runner.errors import LaneRunnerError, UsageError
from lane_runner.home import Home
from lane_runner.service import lock, pause, status

POLL = 0.2


class DrainTimeout(LaneRunnerError):
    """``pause --wait --timeout`` ran out with work still running (exit 1)."""


def register(subparsers: Any) -> None:
    stop = subparsers.add_parser("pause", help="claim nothing new; running work finishes")
    stop.add_argument("--reason", default="paused by an operator", help="shown in status")
    stop.add_argument("--wait", action="store_true", help="return once nothing runs (a drain)")
    stop.add_argument("--timeout", type=seconds, help="with --wait: give up after this many s")
    stop.add_argument("--board", help="pause this board for every runner (stored on the board)")
    add_json_flag(stop)
    stop.set_defaults(handler=pause_runner)
    go = subparsers.add_parser("resume", help="claim again after a pause")
    go.add_argument("--board", help="resume this board for every runner")
    add_json_flag(go)
    go.set_defaults(handler=resume_runner)


def _who() -> str:
    try:
        return f"{getpass.getuser()} (pid {os.getpid()})"
    except (KeyError, OSError):
        return f"uid {os.getuid()} (pid {os.getpid()})"


def pause_runner(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.wait:
        raise UsageError("--timeout goes with --wait")
    cfg = load_config(args)
    if args.board:
        with closing(open_store(cfg)) as store:
            board = store.board(args.board)
            found = board.pause(args.reason, _who())
            running = _drain(lambda: board.counts()["running"], args.timeout) if args.wait else None
        record = pause.Pause(found.reason, found.at, found.by)
    else:
        home = Home(cfg.home)
        home.ensure()
        record = pause.pause(home.pause_file, args.reason, _who())
        running = _drain(lambda: _active(home, record), args.timeout) if args.wait else None
    document = {
        "paused": True,
        "board": args.board,
        **record.to_dict(),
        "at": timestamp(record.at),
        "running": running,
    }
    if args.json:
        print_json(document)
    else:
        print(f"{_what(args.board)} paused: {record.reason}")
        if args.wait:
            print("drained: nothing running")
    return 0


def _what(board: str | None) -> str:
    return f"board {board}" if board else "runner"


def _drain(running: Callable[[], int | None], timeout: float | None) -> int:
    """Wait until ``running`` says 0 (None: not known yet); returns 0."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        active = running()
        if active == 0:
            return 0
        if deadline is not None and time.monotonic() >= deadline:
            raise DrainTimeout(
                f"{'some' if active is None else active} run(s) still running after "
                f"{timeout:g} s; the runner stays paused ('lane-runner status' shows them)"
            )
        time.sleep(POLL)


def _active(home: Home, paused: pause.Pause) -> int | None:
    """Runs the daemon still runs after seeing ``paused``: 0 when no daemon serves this home,
    None while a daemon has not yet published that it saw this very pause (what it last
    published may be an earlier pause, since lifted, with runs claimed after it)."""
    view = status.judge(
        lock.holder(home.lock_file), lock.read_holder(home.lock_file), status.read(home.status_file)
    )
    if view.state in (status.DaemonState.STOPPED, status.DaemonState.STALE):
        return 0
    published = view.published
    if published is None or published.get("paused") != paused.to_dict():
        return None
    return len(published.get("active", []))


def resume_runner(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    if args.board:
        with closing(open_store(cfg)) as store:
            lifted = store.board(args.board).resume()
    else:
        lifted = pause.resume(Home(cfg.home).pause_file)
    if args.json:
        print_json({"paused": False, "board": args.board, "was_paused": lifted})
    else:
        print(f"{_what(args.board)} {'resumed' if lifted else 'was not paused'}")
    return 0
