"""What the ``task`` commands share: which board holds a task, the task's documents
for ``--json``, and the checks of what a person typed (a body file, a workspace)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lane_runner import suggest
from lane_runner.board.base import Board, BoardUnavailable, Store
from lane_runner.board.model import Comment, Event, Run, Task
from lane_runner.board.rules import MAX_BODY_BYTES
from lane_runner.cli.arguments import add_json_flag
from lane_runner.cli.output import print_json, timestamp
from lane_runner.config import Config
from lane_runner.errors import NotFound, UsageError
from lane_runner.run import workspace


def task_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="the task id")
    parser.add_argument("--board", help="the task's board (needed only when several hold its id)")
    add_json_flag(parser)


def _holders(store: Store, task_id: str) -> tuple[list[str], list[str]]:
    """The boards that hold ``task_id``, and those that could not be read now."""
    holders: list[str] = []
    unreadable: list[str] = []
    for each in store.board_slugs():
        try:
            store.board(each).get_task(task_id)
        except NotFound:
            continue
        except BoardUnavailable:
            unreadable.append(each)
            continue
        holders.append(each)
    return holders, unreadable


def board_of(store: Store, task_id: str, slug: str | None) -> str:
    """The board ``--board`` names, else the one board of the home that holds ``task_id``.

    NotFound when none does (naming boards that could not be read, where it might be),
    UsageError naming the boards when several do.
    """
    if slug is not None:
        return slug
    holders, unreadable = _holders(store, task_id)
    if len(holders) > 1:
        raise UsageError(
            f"task {task_id!r} is on several boards ({', '.join(holders)}): "
            "name one with --board"
        )
    if holders:
        return holders[0]
    unread = f"; boards not readable now: {', '.join(unreadable)}" if unreadable else ""
    known = [task.id for each in store.board_slugs() if each not in unreadable
             for task in store.board(each).list_tasks()]
    raise NotFound(
        f"no task {task_id!r} on any board{suggest.hint(task_id, known)}{unread} "
        "(see 'lane-runner task ls')"
    )


def only_board(store: Store, slug: str | None) -> str:
    """The board ``--board`` names, else the home's one board: with one board, naming it
    is no information. UsageError when there is none or several (naming them)."""
    if slug is not None:
        return slug
    slugs = list(store.board_slugs())
    if len(slugs) == 1:
        return slugs[0]
    if not slugs:
        raise UsageError("no board yet: create one with 'lane-runner board create NAME'")
    raise UsageError(f"several boards ({', '.join(slugs)}): name one with --board")


def task_board(store: Store, args: argparse.Namespace) -> Board:
    """The board of the task named in ``args`` (``board_of``)."""
    return store.board(board_of(store, args.task, args.board))


def task_document(task: Task) -> dict[str, Any]:
    """The task record's own field names, times as ISO 8601 UTC."""
    document = asdict(task)
    document["parents"] = list(task.parents)
    for name in ("next_attempt_at", "created_at", "updated_at", "decided_at"):
        document[name] = timestamp(document[name])
    return document


def run_document(run: Run) -> dict[str, Any]:
    document = asdict(run)
    for name in ("claimed_at", "lease_expires_at", "heartbeat_at", "ended_at"):
        document[name] = timestamp(document[name])
    return document


def event_document(event: Event) -> dict[str, Any]:
    return {**asdict(event), "at": timestamp(event.at)}


def comment_document(comment: Comment) -> dict[str, Any]:
    return {**asdict(comment), "at": timestamp(comment.at)}


def read_body(args: argparse.Namespace) -> str:
    if args.body_file is None:
        return str(args.body)
    try:
        if args.body_file == "-":
            raw = sys.stdin.buffer.read(MAX_BODY_BYTES + 1)
        else:
            with Path(args.body_file).open("rb") as handle:
                raw = handle.read(MAX_BODY_BYTES + 1)
    except OSError as error:
        raise UsageError(f"cannot read --body-file {args.body_file}: {error.strerror}") from None
    if len(raw) > MAX_BODY_BYTES:
        raise UsageError(
            f"--body-file {args.body_file} is over the {MAX_BODY_BYTES // 1024} KiB limit; "
            "put the detail in a file in the workspace and point to it"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--body-file {args.body_file} is not UTF-8 text") from None


def checked_workspace(cfg: Config, given: str) -> str:
    """``--workspace`` as an absolute path, checked as a run would meet it (``workspace.
    check_source``): refused now, with git's words, rather than when a runner claims it.
    As root with a ``worker_user``, git runs as that user, as the daemon would."""
    path = Path(given).expanduser().absolute()
    owner = cfg.worker_user if cfg.worker_user and os.geteuid() == 0 else None
    try:
        workspace.check_source(path, owner)
    except workspace.WorkspaceError as error:
        raise UsageError(f"--workspace: {error}") from None
    return str(path)


def report(args: argparse.Namespace, task: Task, verb: str) -> int:
    """``<verb> board/id (now status)``, or the task's document with ``--json``."""
    if args.json:
        print_json(task_document(task))
    else:
        print(f"{verb} {task.board}/{task.id} (now {task.status})")
    return 0
