"""``lane-runner run`` (the daemon) and ``lane-runner recover``."""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from lane_runner.board.base import BoardUnavailable, HostedBoard
from lane_runner.board.model import Status
from lane_runner.cli import dryrun
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table
from lane_runner.daemon import Daemon
from lane_runner.errors import UsageError
from lane_runner.home import Home
from lane_runner.service import breaker, identity, recovery
from lane_runner.service.lock import HomeLock
from lane_runner.service.services import build, preflight

log = logging.getLogger(__name__)

EXIT_PENDING = 3


def register(subparsers: Any) -> None:
    run = subparsers.add_parser("run", help="run the daemon: claim, route, supervise, commit")
    run.add_argument(
        "--until-idle",
        action="store_true",
        help="exit once no task is ready or running (for batch use and tests); tasks "
        "cooling down after a capacity wait count as not ready, and are named at exit",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="claim nothing: route the ready tasks and print what would run where "
        "(exit 1 when one cannot be routed)",
    )
    run.add_argument("--board", help="with --dry-run: one board (default: all)")
    add_json_flag(run)
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


def _idle(daemon: Daemon) -> bool:
    """Nothing ready or running anywhere; a board we cannot read might still have work.

    A ready task cooling down (``next_attempt_at`` in the future) is not ready: a batch
    would otherwise wait out every capacity cooldown, up to ``cooldown_max`` each. Nor is
    one the storm breaker holds back (its workspace or board broken, no probe due): it
    waits for an operator, who would otherwise find the batch still running.
    """
    if daemon.workers or daemon.pending_finalizations:
        return False
    now = time.time()
    trips = daemon.services.breaker.trips()
    cooling: list[str] = []
    held: list[str] = []
    try:
        for slug in daemon.services.store.board_slugs():
            board = daemon.services.store.board(slug)
            if isinstance(board, HostedBoard):
                # Another program's board: its ready tasks of other lanes are not ours to
                # judge, so only this runner's lanes count, cooling down or not.
                counts = board.lane_counts(daemon.cfg.default_assignee)
                if counts.get("ready", 0) or counts.get("running", 0):
                    return False
                continue
            counts = board.counts()
            if counts.get("running", 0):
                return False
            if not counts.get("ready", 0):
                continue
            for task in board.list_tasks(Status.READY):
                if task.next_attempt_at is not None and task.next_attempt_at > now:
                    cooling.append(f"{slug}/{task.id} ({task.next_attempt_at - now:.0f} s)")
                    continue
                trip = breaker.holding(trips, slug, task.workspace)
                if trip is None or trip.probe_at <= now:
                    return False
                held.append(f"{slug}/{task.id} ({trip.scope})")
    except BoardUnavailable:
        return False
    if cooling:
        log.info(
            "idle: %d task(s) cooling down, not waited for: %s", len(cooling), ", ".join(cooling)
        )
    if held:
        log.warning(
            "idle: %d task(s) held back by the storm breaker, not waited for: %s "
            "('lane-runner health show')", len(held), ", ".join(held),
        )
    return True


def run_daemon(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    if args.dry_run:
        return dryrun.show(dryrun.previews(cfg, args.board, None), args.json)
    if args.board or args.json:
        raise UsageError("--board and --json go with --dry-run; the daemon serves every board")
    return Daemon(cfg, until=_idle if args.until_idle else None).serve()


def run_recover(args: argparse.Namespace) -> int:
    cfg = load_config(args)
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
