"""``lane-runner logs TASK``: the task's provider log, for people (or raw), optionally followed."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from lane_runner import files
from lane_runner.cli import transcript
from lane_runner.cli.main import load_config
from lane_runner.cli.output import printable
from lane_runner.errors import NotFound, UsageError
from lane_runner.home import Home
from lane_runner.names import check_name

FOLLOW_POLL = 0.2
KEPT_PARTS = 9  # more than the rotation keeps: every rotated part present is shown


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("logs", help="a task's provider log, rendered for people")
    parser.add_argument("task", help="the task id")
    parser.add_argument("--board", help="the board (needed when several have this task's log)")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    parser.add_argument("--raw", action="store_true", help="the bytes as the CLI wrote them")
    parser.set_defaults(handler=show_logs)


def log_path(home: Home, task: str, board: str | None) -> Path:
    if board is not None:
        path = home.log_file(board, task)
        if not path.exists():
            raise NotFound(f"no log for task {task!r} on board {board!r} ({path})")
        return path
    logs = home.logs
    pattern = f"*/{check_name('task id', task)}.log"
    found = sorted(logs.glob(pattern)) if logs.is_dir() else []
    if not found:
        raise NotFound(f"no log for task {task!r} under {logs}")
    if len(found) > 1:
        boards = ", ".join(path.parent.name for path in found)
        raise UsageError(f"task {task!r} has logs on several boards ({boards}); pass --board")
    return found[0]


def parts(path: Path) -> list[Path]:
    """Rotated parts oldest first (``.N`` … ``.1``), then the live file."""
    rotated = [path.with_name(f"{path.name}.{n}") for n in range(KEPT_PARTS, 0, -1)]
    return [part for part in (*rotated, path) if part.exists()]


def _open(path: Path) -> BinaryIO:
    """A log part for reading; a link or special file there is named, never followed."""
    try:
        return files.open_reader(path)
    except OSError as error:
        raise NotFound(f"cannot read the log {path}: {error.strerror or error}") from None


def _emit(data: bytes, raw: bool) -> None:
    if raw:
        sys.stdout.buffer.write(data)
    else:
        for line in data.decode("utf-8", "replace").splitlines():
            shown = transcript.render(line)
            if shown is not None:
                sys.stdout.write(printable(shown) + "\n")
    sys.stdout.flush()


def _complete_lines(handle: BinaryIO, carry: bytes) -> tuple[bytes, bytes]:
    """What was appended, cut at the last newline (the rest waits for its end)."""
    data = carry + handle.read()
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


def _follow(path: Path, handle: BinaryIO, raw: bool) -> Iterator[None]:
    """Print what is appended after ``handle``'s position; a rotation reopens the live file."""
    carry = b""
    try:
        while True:
            data, carry = _complete_lines(handle, carry)
            if data:
                _emit(data, raw)
            try:
                rotated = os.stat(path).st_ino != os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                rotated = False
            if rotated:
                handle.close()
                handle = _open(path)
            yield
            time.sleep(FOLLOW_POLL)
    finally:
        handle.close()


def show_logs(args: argparse.Namespace) -> int:
    home = Home(load_config(args).home)
    path = log_path(home, args.task, args.board)
    *rotated, _live = parts(path)
    for part in rotated:
        with _open(part) as handle:
            _emit(handle.read(), args.raw)
    # The live file is printed and followed through one handle, so nothing written
    # between printing it and following it can slip through.
    live = _open(path)
    if not args.follow:
        with live:
            _emit(live.read(), args.raw)
        return 0
    try:
        for _ in _follow(path, live, args.raw):
            pass
    except KeyboardInterrupt:
        return 0
    return 0
