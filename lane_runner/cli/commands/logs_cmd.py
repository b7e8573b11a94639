"""``lane-runner logs TASK``: the task's provider log, for people (or raw), optionally followed.

``--json`` prints JSON Lines, one object per log line, so it works while following:
``line`` as the CLI wrote it, ``event`` when that line is a JSON event, ``text`` as
people see it (null for lines that say nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from lane_runner import files
from lane_runner.cli import transcript
from lane_runner.cli.arguments import load_config
from lane_runner.cli.output import ensure_reader, json_bytes, printable
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
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--raw", action="store_true", help="the bytes as the CLI wrote them")
    shape.add_argument(
        "--json", action="store_true", help="JSON Lines: each line raw, parsed and rendered"
    )
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


def line_document(line: str, board: str, task: str) -> dict[str, Any]:
    """One log line for ``--json``: exact, parsed when it is an event, and as shown."""
    event: Any = None
    if line.startswith("{"):
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            event = None  # a line cut by a crash or rotation: kept whole in "line"
    return {"board": board, "task": task, "line": line, "event": event,
            "text": transcript.render(line)}


def _shown(line: str, shape: str, where: tuple[str, str]) -> str:
    """One log line as ``shape`` prints it ("" for a rendered line that says nothing)."""
    if shape == "json":
        return json_bytes(line_document(line, *where), indent=False).decode() + "\n"
    rendered = transcript.render(line)
    return "" if rendered is None else printable(rendered) + "\n"


def _emit(data: bytes, shape: str, where: tuple[str, str]) -> None:
    if shape == "raw":
        sys.stdout.buffer.write(data)
    else:
        for line in data.decode("utf-8", "replace").splitlines():
            sys.stdout.write(_shown(line, shape, where))
    sys.stdout.flush()


def _complete_lines(handle: BinaryIO, carry: bytes) -> tuple[bytes, bytes]:
    """What was appended, cut at the last newline (the rest waits for its end)."""
    data = carry + handle.read()
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


def _follow(
    path: Path, handle: BinaryIO, shape: str, where: tuple[str, str]
) -> Iterator[None]:
    """Print what is appended after ``handle``'s position; a rotation reopens the live file.
    Ends (BrokenPipeError) once the reader has gone, as ``tail -f`` does, even while the
    log is quiet."""
    carry = b""
    try:
        while True:
            ensure_reader()
            data, carry = _complete_lines(handle, carry)
            if data:
                _emit(data, shape, where)
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
    shape = "raw" if args.raw else "json" if args.json else "text"
    where = (path.parent.name, args.task)
    *rotated, _live = parts(path)
    for part in rotated:
        with _open(part) as handle:
            _emit(handle.read(), shape, where)
    # The live file is printed and followed through one handle, so nothing written
    # between printing it and following it can slip through.
    live = _open(path)
    if not args.follow:
        with live:
            _emit(live.read(), shape, where)
        return 0
    try:
        for _ in _follow(path, live, shape, where):
            pass
    except KeyboardInterrupt:
        return 0
    return 0
