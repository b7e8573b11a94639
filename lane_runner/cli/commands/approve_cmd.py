"""``lane-runner task approve|deny``: a person's word on a task waiting for approval
(docs/approvals.md), recorded on the board with who, when and why, from any runner of it.

Who is the OS user running the command, or ``--as``; with ``approval_totp_file``
configured, ``approve`` also needs ``--code``, a TOTP code each board takes once.
"""

from __future__ import annotations

import argparse
import getpass
import time
from contextlib import closing
from typing import Any

from lane_runner.board import open_store
from lane_runner.board.model import Task
from lane_runner.cli.arguments import load_config
from lane_runner.cli.output import print_json
from lane_runner.cli.tasks import task_board, task_document, task_target
from lane_runner.config import Config
from lane_runner.errors import UsageError
from lane_runner.names import is_valid_name
from lane_runner.service import approvals


def register_actions(commands: Any) -> None:
    approve = commands.add_parser(
        "approve", help="let a task waiting for approval run, or its push go"
    )
    task_target(approve)
    approve.add_argument("--note", default="", help="why, recorded with the approval")
    approve.add_argument("--as", dest="who", help="who approves (default: the OS user)")
    approve.add_argument("--code", help="the TOTP code, when approval_totp_file is configured")
    approve.set_defaults(handler=approve_task)

    deny = commands.add_parser(
        "deny", help="refuse a task waiting for approval: it is blocked, its push withheld"
    )
    task_target(deny)
    deny.add_argument("--reason", required=True, help="why, recorded and shown on the task")
    deny.add_argument("--as", dest="who", help="who denies (default: the OS user)")
    deny.set_defaults(handler=deny_task)


def who(args: argparse.Namespace) -> str:
    """``--as``, else the OS user: the name recorded with the decision."""
    name = args.who if args.who is not None else getpass.getuser()
    if not is_valid_name(name):
        raise UsageError(f"--as {name!r}: expected a name of letters, digits, '.', '_' or '-'")
    return str(name)


def approve_task(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    step = approvals.check_code(cfg, args.code, time.time())
    with closing(open_store(cfg)) as store:
        task = task_board(store, args).approve(args.task, who(args), args.note, step)
    return _said(args, task, "approved", cfg)


def deny_task(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise UsageError("task deny: --reason must say why")
    cfg = load_config(args)
    with closing(open_store(cfg)) as store:
        task = task_board(store, args).deny(args.task, who(args), args.reason)
    return _said(args, task, "denied", cfg)


def _said(args: argparse.Namespace, task: Task, verb: str, cfg: Config) -> int:
    if args.json:
        print_json(task_document(task))
    else:
        print(f"{verb} {task.board}/{task.id} by {task.decided_by} "
              f"(now {approvals.shown_status(cfg, task)})")
    return 0
