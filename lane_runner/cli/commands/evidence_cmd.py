"""``lane-runner evidence TASK``: why a done task's result should be trusted, as Markdown
fit for a pull request's body, or ``--json`` (``cli/evidence.py``, docs/verification.md)."""

from __future__ import annotations

import argparse
from contextlib import closing
from typing import Any

from lane_runner.board import open_store
from lane_runner.cli import evidence
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, printable
from lane_runner.cli.tasks import task_board
from lane_runner.errors import NotFound
from lane_runner.home import Home
from lane_runner.usage import record, share


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evidence", help="a done task's evidence (diff, checks, review, spend) as Markdown"
    )
    parser.add_argument("task", help="the task id")
    parser.add_argument("--board", help="the board (needed when several hold this task)")
    add_json_flag(parser)
    parser.set_defaults(handler=show_evidence)


def show_evidence(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    with closing(open_store(cfg)) as store:
        board = task_board(store, args)
        task = board.get_task(args.task)
        at_home = record.read(Home(cfg.home).usage_file(task.board))
        spent = share.task_usage(board, at_home, task.id)
        found = evidence.document(task, board.events(task.id), spent)
    if found is None:
        raise NotFound(f"task {task.board}/{task.id} is {task.status}: evidence comes with "
                       "its completion (lane-runner task show has what there is)")
    if args.json:
        print_json(found)
    else:
        print("\n".join(printable(line) for line in evidence.markdown(found).splitlines()))
    return 0
