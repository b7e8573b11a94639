"""``lane-runner task edit|retry|delete``: changing what was filed.

Each is one board transaction (``board/base.py``): refused while the task runs, and
on a Hermes board, whose tasks are Hermes's, refused naming the ``hermes kanban``
command to use.
"""

from __future__ import annotations

import argparse
from contextlib import closing
from typing import Any

from lane_runner.board import open_store
from lane_runner.board.model import TaskEdit
from lane_runner.board.rules import MAX_RETRIES
from lane_runner.cli.arguments import dollars, load_config, seconds, whole
from lane_runner.cli.output import print_json
from lane_runner.cli.tasks import (
    checked_workspace,
    read_body,
    report,
    task_board,
    task_document,
    task_target,
)
from lane_runner.errors import UsageError

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
    edit.add_argument("--assignee", help="cli-auto or cli-<codex|claude>-<effort>; '' clears it")
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
        "retry", help="a blocked task back to ready, its failures reset, with a comment"
    )
    task_target(retry)
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
    with closing(open_store(load_config(args))) as store:
        task = task_board(store, args).retry(args.task, args.comment, author=args.author)
    return report(args, task, "retried")


def delete_task(args: argparse.Namespace) -> int:
    with closing(open_store(load_config(args))) as store:
        task = task_board(store, args).delete(args.task, force=args.force)
    if args.json:
        print_json({"deleted": task_document(task)})
    else:
        print(f"deleted {task.board}/{task.id} (was {task.status}) with its runs and events")
    return 0
