"""``lane-runner cleanup``: the daemon's cleanup sweep, once, now (``run/cleanup.py``).

A running daemon sweeps every ``gc_interval`` on its own. A batch (``run
--until-idle``) sweeps only when it starts, so the worktrees, logs and journal files
of the tasks it finished stay until the next one; this sweeps them without a daemon.
It takes the home as ``recover`` does, so it refuses while a daemon serves it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table
from lane_runner.home import Home
from lane_runner.run import cleanup, command
from lane_runner.service.lock import HomeLock
from lane_runner.service.services import build, preflight


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cleanup",
        help="remove what finished tasks left (worktrees, logs, old journal files) now; "
        "a running daemon does it every gc_interval",
    )
    add_json_flag(parser)
    parser.set_defaults(handler=run_cleanup)


def run_cleanup(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    binaries = preflight(cfg)  # a bad configuration leaves the home untouched
    with HomeLock(Home(cfg.home).lock_file, "cleanup"):
        services = build(cfg, binaries)
        try:
            with command.supervised(services.supervision()):  # a kill -9 leaves no hook behind
                report = cleanup.sweep(
                    services, cleanup.retention(cfg), time.time(), lambda: False
                )
        finally:
            services.close()
    document = {
        "worktrees_removed": report.worktrees_removed,
        "worktrees_kept": report.kept,
        "branches_deleted": report.branches_deleted,
        "followed_up": report.followed_up,
        "logs_removed": report.logs_removed,
        "journal_removed": [
            {"board": removal.board, "name": removal.name, "reason": removal.reason}
            for removal in report.journal.removed
        ],
        "usage_records_dropped": report.usage_dropped,
    }
    if args.json:
        print_json(document)
    else:
        _print(document)
    return 0


def _print(document: dict[str, Any]) -> None:
    rows = [("worktree removed", task, "") for task in document["worktrees_removed"]]
    rows += [("worktree kept", task, why) for task, why in document["worktrees_kept"].items()]
    rows += [("branch deleted", task, "") for task in document["branches_deleted"]]
    rows += [("followed up", task, "") for task in document["followed_up"]]
    rows += [
        ("journal file removed", f"{r['board']}/{r['name']}", r["reason"])
        for r in document["journal_removed"]
    ]
    if rows:
        print_table(("action", "what", "why"), rows)
    else:
        print("nothing to clean up")
    if document["logs_removed"]:
        print(f"task logs removed: {len(document['logs_removed'])}")
    if document["usage_records_dropped"]:
        print(f"old usage records the boards hold, dropped: {document['usage_records_dropped']}")
