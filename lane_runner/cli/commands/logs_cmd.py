"""``lane-runner logs TASK``: the task's provider log, for people (or raw), optionally followed.

``--follow`` ends with the run, as the board tells it: the task's run in progress (or,
for a task waiting to be claimed, the next one to begin), once it has ended and its
last lines are printed; a task that is done, blocked or archived has nothing to follow.

``--json`` prints JSON Lines, one object per log line, so it works while following:
``line`` as the CLI wrote it, ``event`` when that line is a JSON event, ``text`` as
people see it (null for lines that say nothing).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from lane_runner import files
from lane_runner.board import open_store
from lane_runner.board.base import Board, BoardUnavailable, Store
from lane_runner.board.model import Status
from lane_runner.cli import transcript
from lane_runner.cli.arguments import load_config
from lane_runner.cli.output import ensure_reader, json_bytes, printable
from lane_runner.errors import NotFound, UsageError
from lane_runner.home import Home
from lane_runner.names import check_name

log = logging.getLogger(__name__)

FOLLOW_POLL = 0.2
RUN_LOOK = 1.0  # how often a follow asks the board whether the run has ended
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


@dataclass
class FollowedRun:
    """The run a follow waits on, read from the board at most every ``RUN_LOOK`` s."""

    board: Board
    task_id: str
    after: int
    """Runs with a higher id began after the follow started."""
    run: int | None
    """The run followed; None: the next one to begin."""
    settled: bool
    """The task had no run and will get none without a person (done, blocked, archived)."""
    looked: float = float("-inf")

    @classmethod
    def of(cls, store: Store, slug: str, task_id: str) -> FollowedRun | None:
        """None when the board does not know the task (a log left by a task since
        deleted): nothing will say when to stop, so the follow goes on until Ctrl-C."""
        try:
            board = store.board(slug)
            task = board.get_task(task_id)
            runs = board.runs(task_id)
        except NotFound:
            return None
        open_run = next((r.id for r in runs if r.ended_at is None), None)
        return cls(
            board, task_id, max((r.id for r in runs), default=0), open_run,
            open_run is None and task.status in (Status.DONE, Status.BLOCKED, Status.ARCHIVED),
        )

    def over(self, now: float) -> bool:
        if self.settled:
            return True
        if now - self.looked < RUN_LOOK:
            return False
        self.looked = now
        try:
            runs = self.board.runs(self.task_id)
        except BoardUnavailable as error:  # the follow goes on; the next look may see it
            log.debug("cannot look whether the run has ended: %s", error)
            return False
        if self.run is None:
            begun = [r.id for r in runs if r.id > self.after]
            if not begun:
                return False
            self.run = min(begun)
        return any(r.id == self.run and r.ended_at is not None for r in runs)


def _follow(
    path: Path, handle: BinaryIO, shape: str, where: tuple[str, str],
    followed: FollowedRun | None,
) -> Iterator[None]:
    """Print what is appended after ``handle``'s position; a rotation reopens the live file.
    Ends with the run (what it wrote last printed first), or (BrokenPipeError) once the
    reader has gone, as ``tail -f`` does, even while the log is quiet."""
    carry = b""
    try:
        while True:
            ensure_reader()
            # Asked before the read, so the lines the run wrote before it ended are in it.
            over = followed is not None and followed.over(time.monotonic())
            data, carry = _complete_lines(handle, carry)
            if data:
                _emit(data, shape, where)
            if over:
                if carry:
                    _emit(carry + b"\n", shape, where)
                return
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
    cfg = load_config(args)
    home = Home(cfg.home)
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
    with closing(open_store(cfg)) as store:
        followed = FollowedRun.of(store, where[0], args.task)
        try:
            for _ in _follow(path, live, shape, where, followed):
                pass
        except KeyboardInterrupt:
            return 0
    return 0
