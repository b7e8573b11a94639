"""``lane-runner task edit|retry|delete``: changing what was filed.

Each is one board transaction (``board/base.py``): refused while the task runs, and
on a Hermes board, whose tasks are Hermes's, refused naming the ``hermes kanban``
command to use.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from typing import Any

from lane_runner import redact
from lane_runner.board import open_store
from lane_runner.board.base import Store
from lane_runner.board.model import Status, Task, TaskEdit
from lane_runner.board.rules import MAX_RETRIES
from lane_runner.cli.arguments import add_json_flag, dollars, load_config, seconds, whole
from lane_runner.cli.output import print_json
from lane_runner.cli.tasks import (
    board_of,
    checked_workspace,
    only_board,
    read_body,
    report,
    task_board,
    task_document,
    task_target,
)
from lane_runner.errors import LaneRunnerError, UsageError
from lane_runner.names import PROVIDERS

RETRIED = "retried by an operator: failures reset"


def register_actions(commands: Any) -> None:
    edit = commands.add_parser(
        "edit", help="change a task that is not running (title, body, assignee, limits)"
    )
    task_target(edit)
    edit.add_argument("--title")
    body = edit.add_mutually_exclusive_group()
    body.add_argument("--body", help="the new task text")
    body.add_argument("--body-file", help="read the new task text from a file ('-' for stdin)")
    lanes = f"cli-auto or cli-<{'|'.join(PROVIDERS)}>-<effort>"
    edit.add_argument("--assignee", help=f"{lanes}; '' clears it")
    edit.add_argument("--priority", type=int, help="higher runs first")
    edit.add_argument("--workspace", help="the git repository (checked now); '' clears it")
    edit.add_argument("--max-runtime", type=seconds, help="seconds per run")
    edit.add_argument("--goal-turns", type=whole(1), help="turns before giving up")
    edit.add_argument(
        "--max-retries", type=whole(0, MAX_RETRIES), help="counted failures retried"
    )
    edit.add_argument("--max-cost-usd", type=dollars, help="the task's dollar budget")
    edit.add_argument("--max-tokens", type=whole(1), help="the task's token budget")
    edit.set_defaults(handler=edit_task)

    retry = commands.add_parser(
        "retry", help="blocked tasks back to ready, their failures reset, with a comment"
    )
    retry.add_argument("tasks", nargs="*", metavar="TASK", help="the task ids")
    retry.add_argument(
        "--blocked", action="store_true", help="every blocked task of the board, instead of ids"
    )
    retry.add_argument(
        "--board", help="the tasks' board (needed with --blocked when the home has several)"
    )
    add_json_flag(retry)
    retry.add_argument(
        "--comment", default=RETRIED, help="what changed, for the next run to read"
    )
    retry.add_argument("--author", default="operator")
    retry.set_defaults(handler=retry_task)

    delete = commands.add_parser(
        "delete", help="remove an archived task with its runs, events and comments"
    )
    task_target(delete)
    delete.add_argument(
        "--force", action="store_true", help="archive it first (never a running task)"
    )
    delete.set_defaults(handler=delete_task)


def _edit_of(args: argparse.Namespace) -> TaskEdit:
    cfg = load_config(args)
    body = read_body(args) if args.body is not None or args.body_file is not None else None
    edit = TaskEdit(
        title=args.title,
        body=body,
        assignee=args.assignee,
        priority=args.priority,
        workspace=checked_workspace(cfg, args.workspace) if args.workspace else args.workspace,
        max_runtime=args.max_runtime,
        goal_turns=args.goal_turns,
        max_retries=args.max_retries,
        max_cost_usd=args.max_cost_usd,
        max_tokens=args.max_tokens,
    )
    if edit == TaskEdit():
        raise UsageError(
            "task edit: name what to change: --title, --body, --body-file, --assignee, "
            "--priority, --workspace, --max-runtime, --goal-turns, --max-retries, "
            "--max-cost-usd or --max-tokens"
        )
    return edit


def edit_task(args: argparse.Namespace) -> int:
    edit = _edit_of(args)
    with closing(open_store(load_config(args))) as store:
        task = task_board(store, args).edit(args.task, edit)
    return report(args, task, "edited")


def retry_task(args: argparse.Namespace) -> int:
    """Each task named (or every blocked one of the board) back to ready, one transaction
    each. Every id is found before any is retried, so a typo changes nothing; a task that
    cannot be retried (not blocked, running) is said and the others still are (exit 1)."""
    if args.blocked == bool(args.tasks):
        raise UsageError("task retry: name the task ids, or --blocked for all of a board's")
    with closing(open_store(load_config(args))) as store:
        slug, targets = _retry_targets(store, args)
        retried, refused = _retry_each(store, targets, args)
    if args.json:
        documents = [task_document(task) for task in retried]
        print_json(documents[0] if len(args.tasks) == 1 and documents else documents)
    else:
        for task in retried:
            print(f"retried {task.board}/{task.id} (now {task.status})")
        if slug is not None and not targets:
            print(f"no blocked task on board {slug}")
    for line in refused:
        print(f"lane-runner: {redact.text(line)}", file=sys.stderr)
    return 1 if refused else 0


def _retry_targets(
    store: Store, args: argparse.Namespace
) -> tuple[str | None, list[tuple[str, str]]]:
    """The (board, task id) pairs to retry, every id found first; with ``--blocked``,
    the board's slug and its blocked tasks."""
    if args.blocked:
        slug = only_board(store, args.board)
        return slug, [(slug, task.id) for task in store.board(slug).list_tasks(Status.BLOCKED)]
    return None, [(board_of(store, task_id, args.board), task_id) for task_id in args.tasks]


def _retry_each(
    store: Store, targets: list[tuple[str, str]], args: argparse.Namespace
) -> tuple[list[Task], list[str]]:
    """Retry each target in its own transaction: the tasks retried, and what was refused
    for the others (one task alone: its error is the command's, as for any other)."""
    retried: list[Task] = []
    refused: list[str] = []
    for slug, task_id in targets:
        try:
            retried.append(store.board(slug).retry(task_id, args.comment, author=args.author))
        except LaneRunnerError as error:
            if len(targets) == 1:
                raise
            refused.append(f"{slug}/{task_id}: {error}")
    return retried, refused


def delete_task(args: argparse.Namespace) -> int:
    with closing(open_store(load_config(args))) as store:
        task = task_board(store, args).delete(args.task, force=args.force)
    if args.json:
        print_json({"deleted": task_document(task)})
    else:
        print(f"deleted {task.board}/{task.id} (was {task.status}) with its runs and events")
    return 0
