"""``lane-runner run`` (the daemon) and ``lane-runner recover``."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from lane_runner.cli import batch, dryrun
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.commands import web_cmd
from lane_runner.cli.output import print_json, print_table
from lane_runner.daemon import Daemon
from lane_runner.errors import UsageError
from lane_runner.home import Home
from lane_runner.names import PROVIDERS
from lane_runner.service import identity, recovery
from lane_runner.service.lock import HomeLock
from lane_runner.service.services import build, preflight

log = logging.getLogger(__name__)

EXIT_PENDING = 3


def register(subparsers: Any) -> None:
    run = subparsers.add_parser(
        "run",
        help="run the daemon: claim, route, supervise, commit",
        description="Run the daemon: claim, route, supervise, commit. It refuses to start "
        f"(exit 2) when no agent CLI ({', '.join(PROVIDERS)}) is found (<provider>_bin, "
        "else PATH) and simulate is off. It makes the home if it is missing.",
    )
    run.add_argument(
        "--until-idle",
        action="store_true",
        help="exit once no task is ready or running (for batch use and tests); tasks "
        "cooling down or held by the storm breaker are not waited for, and are named at "
        "exit. Exit status: 0 every task it ran is done; 4 some ended blocked or gave up; "
        "3 work was left waiting; 2 bad input or configuration (docs/commands.md)",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="claim nothing: route the ready tasks and print what would run where "
        "(exit 1 when one cannot be routed)",
    )
    run.add_argument("--board", help="with --dry-run: one board (default: all)")
    run.add_argument(
        "--json", action="store_true",
        help="with --dry-run: the previews; with --until-idle: what the batch did, as JSON",
    )
    run.set_defaults(handler=run_daemon)
    rec = subparsers.add_parser(
        "recover", help="replay the journal and hand back orphaned runs (exit 3: some must wait)"
    )
    identity_choice = rec.add_mutually_exclusive_group()
    identity_choice.add_argument(
        "--adopt",
        action="store_true",
        help="this home replaces the one its node id was made for (moved, or restored "
        "after a loss; that one no longer runs): bind the id to this home",
    )
    identity_choice.add_argument(
        "--new-node",
        action="store_true",
        help="this home (a copy) is a runner of its own: give it a new node id",
    )
    add_json_flag(rec)
    rec.set_defaults(handler=run_recover)


def run_daemon(args: argparse.Namespace) -> int:
    cfg = load_config(args, needs_home=args.dry_run)  # the daemon makes its home
    if args.dry_run:
        return dryrun.show(dryrun.previews(cfg, args.board, None), args.json)
    if args.board:
        raise UsageError("--board goes with --dry-run; the daemon serves every board")
    if not args.until_idle:
        if args.json:
            raise UsageError("--json goes with --dry-run or --until-idle")
        with web_cmd.beside_the_daemon(cfg):
            return Daemon(cfg).serve()
    idle = batch.IdleWatch()
    daemon = Daemon(cfg, until=idle)
    with web_cmd.beside_the_daemon(cfg):
        served = daemon.serve()
    if not idle.reached:  # stopped by a signal before the work was done
        return served
    found = batch.report(cfg, daemon.services.node, daemon.started_at, idle.waiting)
    return batch.show(found, args.json)


def run_recover(args: argparse.Namespace) -> int:
    cfg = load_config(args, needs_home=False)  # the start's first step, as the unit runs it
    binaries = preflight(cfg)  # a bad configuration leaves the home untouched
    home = Home(cfg.home)
    with HomeLock(home.lock_file, "recover"):
        if args.adopt:
            identity.adopt(home)
        elif args.new_node:
            identity.renew(home)
        services = build(cfg, binaries)
        try:
            result = recovery.recover(services)
        finally:
            services.close()
    document = {
        "journal": result.journal.as_json(),
        "reclaimed": [ref.to_dict() for ref in result.reclaimed],
        "reconciled": [ref.to_dict() for ref in result.reconciled],
        "unavailable_boards": result.unavailable_boards,
        "ended_processes": result.ended_processes,
        "usage_sent": result.usage_sent,
        "pending_left": result.pending_left,
    }
    if args.json:
        print_json(document)
    else:
        _print_recovery(document)
    return EXIT_PENDING if result.pending_left else 0


def _print_recovery(document: dict[str, Any]) -> None:
    rows = [
        (
            event["action"],
            event["board"],
            event["task_id"],
            event["run_id"],
            event["reason"] or event["name"],
        )
        for event in document["journal"]["events"]
    ]
    rows += [
        ("reclaimed", ref["board"], ref["task_id"], ref["run_id"], ref["reason"])
        for ref in document["reclaimed"]
    ]
    rows += [
        ("reconciled", ref["board"], ref["task_id"], ref["run_id"], ref["reason"])
        for ref in document["reconciled"]
    ]
    if rows:
        print_table(("action", "board", "task", "run", "detail"), rows)
    else:
        print("nothing to recover")
    if document["ended_processes"]:
        print(f"ended provider processes left by a killed daemon: {document['ended_processes']}")
    if document["usage_sent"]:
        print(f"usage records sent to their board's shared ledger: {document['usage_sent']}")
    for slug, reason in document["unavailable_boards"].items():
        print(f"board {slug} unavailable: {reason}")
    if document["pending_left"]:
        print(
            f"{document['pending_left']} finalization(s) wait for their board; "
            "run 'lane-runner recover' again once it is back"
        )
