"""``lane-runner status``: is a daemon running, what is it doing, and what waits.

The daemon's own view comes from ``status.json`` and is believed only while
the home lock is held by the pid that wrote it (``status.judge``). Board counts,
provider health and pending finalizations are read directly, so they are
right even when no daemon runs. ``--watch`` prints it again every ``--interval``
seconds (JSON Lines with ``--json``) until Ctrl-C or its reader goes away.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import asdict
from typing import Any

from journal import Journal
from lane_runner import clock, files
from lane_runner.board import open_store
from lane_runner.board.base import Board, BoardError
from lane_runner.board.model import Approval, Status, Task
from lane_runner.cli import inspection
from lane_runner.cli.arguments import add_json_flag, load_config, seconds, whole
from lane_runner.cli.commands.task_cmd import backoff_of
from lane_runner.cli.output import (
    duration,
    ensure_reader,
    json_bytes,
    print_json,
    print_table,
    printable,
    timestamp,
)
from lane_runner.config import Config
from lane_runner.errors import UsageError
from lane_runner.home import NODE_ID_BYTES, Home
from lane_runner.router import health
from lane_runner.run import lanestate
from lane_runner.service import approvals, breaker, lock, pause, status, stopping
from lane_runner.usage import budget, record, share


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status", help="daemon, active runs, provider health, board counts, pending results"
    )
    parser.add_argument(
        "--watch", action="store_true", help="print it again every --interval s until Ctrl-C"
    )
    parser.add_argument(
        "--interval", type=seconds, default=2.0, help="with --watch: seconds between (2)"
    )
    parser.add_argument("--count", type=whole(1), help="with --watch: stop after this many")
    add_json_flag(parser)
    parser.set_defaults(handler=show_status)


def _board_counts(cfg: Config, now: float, node: str | None) -> dict[str, dict[str, Any]]:
    """Each board's counts and controls; with ``node`` (no daemon of this home serves),
    the tasks its runs left running, which the next start resumes."""
    counts: dict[str, dict[str, Any]] = {}
    with closing(open_store(cfg)) as store:
        for slug in store.board_slugs():
            try:
                board = store.board(slug)
                paused = board.paused()
                counts[slug] = {
                    "counts": board.counts(),
                    "paused": None if paused is None else {
                        "reason": paused.reason, "at": timestamp(paused.at), "by": paused.by
                    },
                    "backing_off": _backing_off(board.list_tasks(Status.READY), now),
                    "left_running": [] if node is None else _left_running(board, node),
                    "awaiting_approval": _awaiting(cfg, board),
                    **_today(cfg, slug, board),
                    "error": None,
                }
            except BoardError as error:
                counts[slug] = {
                    "counts": {}, "paused": None, "backing_off": [], "left_running": [],
                    "awaiting_approval": [], **_today(cfg, slug, None), "error": str(error),
                }
    return counts


def _awaiting(cfg: Config, board: Board) -> list[dict[str, Any]]:
    """Tasks waiting for a person's ``task approve``: before their run, or their push."""
    if approvals.approval_for(cfg, board.slug) is Approval.NONE:
        return []
    return [
        {"task_id": task.id, "before": waiting.value}
        for status in (Status.READY, Status.DONE)
        for task in board.list_tasks(status)
        if (waiting := approvals.awaiting(cfg, task)) is not None
    ]


def _left_running(board: Board, node: str) -> list[dict[str, Any]]:
    """Tasks still ``running`` under a run of ``node`` while no daemon of it serves: a
    stop left them claimed, and the next start reclaims them and resumes their sessions."""
    left = []
    for task in board.list_tasks(Status.RUNNING):
        run = next((r for r in board.runs(task.id) if r.id == task.current_run_id), None)
        if run is not None and run.node == node and run.ended_at is None:
            left.append({"task_id": task.id, "run_id": run.id})
    return left


def _node_of(home: Home) -> str | None:
    """This home's node id, read only (``status`` never makes one); None without one."""
    try:
        return files.read(home.node_file, NODE_ID_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _backing_off(ready: list[Task], now: float) -> list[dict[str, Any]]:
    """Ready tasks waiting out a backoff after counted failures (``failure_backoff_base``)."""
    return [
        {"task_id": task.id, "failures": task.failure_count, **backoff}
        for task in ready
        if task.failure_count and (backoff := backoff_of(task, now)) is not None
    ]


def _breaker(home: Home) -> list[dict[str, Any]]:
    """What the storm breaker marks broken (``service/breaker.py``), with why."""
    return [
        {
            **trip.to_dict(),
            "tripped_at": timestamp(trip.tripped_at),
            "probe_at": timestamp(trip.probe_at),
            "why": trip.describe(),
        }
        for trip in breaker.read(home.breaker_file).values()
    ]


def _today(cfg: Config, slug: str, board: Board | None) -> dict[str, Any]:
    """What the board spent today (UTC; its shared ledger with this home's, or this home's
    alone when the board could not be read), and its daily budget with why nothing is
    claimed there when it is spent (None without a budget)."""
    today = share.spent_today(board, record.read(Home(cfg.home).usage_file(slug)), clock.now())
    limit = budget.daily_budget(cfg.daily_budget_usd, slug)
    return {
        "usage_today": today.to_dict(),
        "budget": None if limit is None else {
            "daily_usd": limit, "spent_usd": round(today.cost_usd, 6),
            "spent": budget.board_spent(cfg.daily_budget_usd, slug, today),
        },
    }


def _pending(home: Home, unsafe: list[str]) -> list[dict[str, Any]]:
    """Accepted results not yet on their board: pending, prepared and staged records
    (none listed while a directory of the home is a link: it is not read through)."""
    if unsafe:
        return []
    return [
        {"board": e.board, "task_id": e.task_id, "run_id": e.run_id, "state": e.kind}
        for e in Journal(home.lanes).entries()
        if e.kind in inspection.UNFINISHED
    ]


def _cycling(home: Home) -> list[dict[str, Any]]:
    """Tasks going round ready -> cooldown: how many times in a row, since when, why."""
    return [
        {
            "board": state.board,
            "task_id": state.task_id,
            "cooldowns": state.cooldowns,
            "since": state.cycles[0]["at"] if state.cycles else None,
            "last_cause": state.cycles[-1]["cause"] if state.cycles else None,
            "last_reason": state.cycles[-1]["reason"] if state.cycles else None,
        }
        for state in lanestate.cycling_tasks(home.lanes)
    ]


def collect(cfg: Config, now: float) -> dict[str, Any]:
    home = Home(cfg.home)
    unsafe = home.unsafe_directories()
    view = status.judge(
        lock.holder(home.lock_file),
        lock.read_holder(home.lock_file),
        status.read(home.status_file),
    )
    published = view.published or {}
    serving = view.state in (status.DaemonState.RUNNING, status.DaemonState.STARTING)
    active = [
        {**run, "runtime_seconds": round(now - run["started_at"], 3)}
        for run in published.get("active", [])
    ]
    runner_pause = pause.read(home.pause_file)
    return {
        "home": str(home.root),
        "paused": None if runner_pause is None else {
            **runner_pause.to_dict(), "at": timestamp(runner_pause.at)
        },
        "daemon": {
            "state": view.state.value,
            "pid": view.pid,
            "since": timestamp(view.since),
            "detail": (
                stopping.status_words(published["stopping"], len(published["active"]), now)
                if published.get("stopping") else view.detail
            ),
            "stopping": published.get("stopping"),
            "concurrency": published.get("concurrency"),
            "runs_finished": published.get("runs_finished"),
            "metrics_port": published.get("metrics_port"),
            "metrics_address": published.get("metrics_address"),
            "published_at": timestamp(published.get("published_at")),
            "hold": published.get("hold"),
            "slots": published.get("providers"),
            "memory": published.get("memory"),
            "disk": published.get("disk"),
            "config": published.get("config"),
        },
        "active": active,
        "providers": _providers(home),
        "boards": _board_counts(cfg, now, None if serving else _node_of(home)),
        "breaker": _breaker(home),
        "pending_finalizations": _pending(home, unsafe),
        "cycling": _cycling(home),
        "cooldown_limit": cfg.cooldown_limit,
        "unsafe_directories": unsafe,
    }


def _spent_cell(today: dict[str, Any], found: dict[str, Any] | None) -> str:
    """``$1.2300 (12,400 tokens)``, ``… of $5.0000`` with a budget, or the board's
    spent budget in words."""
    if found is not None and found["spent"]:
        return f"not claiming: {found['spent']}"
    unknown = "" if today["cost_complete"] else "+?"
    said = f"${today['cost_usd']:.4f}{unknown} ({today['total_tokens']:,} tokens)"
    return said if found is None else f"{said} of ${found['daily_usd']:.4f}"


def _providers(home: Home) -> list[dict[str, Any]]:
    """Each provider's recorded health, and the usage limit it is under (by the runner's
    clock, which a test may move: ``lane_runner/clock.py``)."""
    now = clock.now()
    return [
        {**asdict(h), "fresh": h.fresh(now),
         "limit": health.limit_words(h) if h.until is not None and h.fresh(now) else None}
        for h in health.read_all(home.provider_health)
    ]


#: Home the cursor and clear the screen: a watching terminal shows one status, not a scroll.
CLEAR = "\x1b[H\x1b[2J"
#: How often a watch between refreshes looks whether its reader is still there.
READER_LOOK = 0.2


def show_status(args: argparse.Namespace) -> int:
    if args.count is not None and not args.watch:
        raise UsageError("--count goes with --watch")
    cfg = load_config(args)
    shown = 0
    try:
        while True:
            now = time.time()
            _show(args, collect(cfg, now), now)
            sys.stdout.flush()
            shown += 1
            if not args.watch or shown == args.count:
                return 0
            _pause(args.interval)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a watch ends


def _show(args: argparse.Namespace, document: dict[str, Any], now: float) -> None:
    """One status: a JSON line when watching as JSON, a JSON document, or the table
    (on a clear screen when a terminal watches)."""
    if args.json and args.watch:
        sys.stdout.buffer.write(json_bytes(document, indent=False) + b"\n")  # JSON Lines
    elif args.json:
        print_json(document)
    else:
        if args.watch and sys.stdout.isatty():
            sys.stdout.write(CLEAR)
        _print(document, now)


def _pause(interval: float) -> None:
    """Sleep ``interval`` s, ending early (BrokenPipeError) once the reader has gone."""
    deadline = time.monotonic() + interval
    while (left := deadline - time.monotonic()) > 0:
        ensure_reader()
        time.sleep(min(READER_LOOK, left))


def _ago(now: float, at: float | None) -> str | None:
    return None if at is None else f"{duration(now - at)} ago"


def _warning(run: dict[str, Any]) -> str | None:
    """A stuck warning, the provider slot a run waits for, or its ending waiting for the board."""
    texts = [w["message"] for w in run.get("warnings", [])]
    if run.get("waiting_for"):
        texts.append(f"waiting for a {run['waiting_for']} slot")
    if run.get("ending"):
        texts.append(run["ending"])
    return "; ".join(texts) or None


def _clock(run: dict[str, Any], now: float) -> str | None:
    """Which stall clock runs and its limit (``tool`` while a tool call is in flight), and
    whether the run counts as working by its CPU use although it is quiet."""
    if not run.get("clock"):
        return None
    shown = str(run["clock"])
    if run.get("stall_limit"):
        shown += f" {duration(run['stall_limit'])}"
    busy, event = run.get("busy_at"), run.get("last_event_at")
    if busy is not None and (event is None or busy > event):
        shown += f", CPU busy {_ago(now, busy)}"
    return shown


def _print_config(watched: dict[str, Any]) -> None:
    """A configuration file that was not taken, and keys that wait for a restart."""
    if watched.get("error"):
        print(f"configuration: {watched['file']} was not taken, the last good one is in "
              f"force: {watched['error']}")
    if watched.get("restart_needed"):
        print(f"configuration: {', '.join(watched['restart_needed'])} changed; the new value "
              "takes effect at the next start")


def _print_memory(memory: dict[str, Any]) -> None:
    """Memory pressure, when there is any."""
    pressure = memory.get("pressure")
    if pressure not in (None, "ok"):
        limit = "; one new run per pass" if pressure == "elevated" else ""
        print(f"memory pressure {pressure}: {memory['available'] >> 20} MiB available "
              f"({memory['source']}){limit}")


def _print_controls(daemon: dict[str, Any]) -> None:
    if daemon["hold"]:
        print(f"not claiming: {daemon['hold']['reason']}")
    _print_config(daemon.get("config") or {})
    _print_memory(daemon.get("memory") or {})
    slots = daemon["slots"] or {}
    capped = [
        f"{name} {slot['running']}/{slot['cap']}"
        for name, slot in slots.get("providers", {}).items()
        if slot["cap"] is not None
    ]
    if capped:
        print(f"provider caps: {', '.join(capped)}, {slots.get('waiting', 0)} waiting for a slot")


def _print(document: dict[str, Any], now: float) -> None:
    _print_daemon(document)
    _print_active(document, now)
    print()
    _print_providers(document, now)
    print()
    _print_boards(document)
    _print_waits(document)
    _print_pending(document)
    _print_cycling(document, now)


def _print_daemon(document: dict[str, Any]) -> None:
    """Unsafe directories, the daemon's state, a pause, and the running daemon's slots
    and controls."""
    for problem in document["unsafe_directories"]:
        print(f"warning: {problem}: not read through; move it aside (see 'lane-runner doctor')")
    daemon = document["daemon"]
    line = f"daemon: {daemon['state']}"
    if daemon["pid"] is not None:
        line += f" (pid {daemon['pid']}, since {daemon['since']})"
    print(f"{line}: {daemon['detail']}")
    if document["paused"]:
        print(f"paused since {document['paused']['at']}: {document['paused']['reason']}")
    if daemon["state"] == status.DaemonState.RUNNING:
        print(
            f"slots: {len(document['active'])}/{daemon['concurrency']} busy, "
            f"{daemon['runs_finished']} runs finished"
            + (f", metrics on {_metrics_url(daemon)}" if daemon["metrics_port"] else "")
        )
        _print_controls(daemon)


def _print_active(document: dict[str, Any], now: float) -> None:
    """The runs in flight, one row each."""
    if document["active"]:
        print()
        print_table(
            (
                "board",
                "task",
                "run",
                "provider",
                "model",
                "effort",
                "runtime",
                "heartbeat",
                "last event",
                "clock",
                "warning",
                "log",
            ),
            [
                (
                    run["board"],
                    run["task_id"],
                    run["run_id"],
                    run["provider"],
                    run["model"],
                    run["effort"],
                    duration(run["runtime_seconds"]),
                    _ago(now, run["last_heartbeat_at"]),
                    _ago(now, run["last_event_at"]),
                    _clock(run, now),
                    _warning(run),
                    run["log_path"],
                )
                for run in document["active"]
            ],
        )


def _print_providers(document: dict[str, Any], now: float) -> None:
    """Each provider's health and the limit it last announced."""
    providers = document["providers"]
    if providers:
        print_table(
            ("provider", "state", "fresh", "checked", "reason"),
            [
                (
                    p["provider"],
                    p["state"],
                    "yes" if p["fresh"] else "no",
                    _ago(now, p["checked_at"]),
                    p["reason"],
                )
                for p in providers
            ],
        )
        for p in providers:
            if p["limit"]:
                print(f"{p['provider']}: {p['limit']}")
    else:
        print("providers: no health recorded (no capacity or auth failure seen)")


def _print_boards(document: dict[str, Any]) -> None:
    """Each board's tasks by status, pause, spend today and error."""
    boards = document["boards"]
    statuses = sorted({name for board in boards.values() for name in board["counts"]})
    if boards:
        print_table(
            ("board", *statuses, "paused", "spent today", "error"),
            [
                (
                    slug,
                    *(board["counts"].get(name, 0) for name in statuses),
                    board["paused"]["reason"] if board["paused"] else None,
                    _spent_cell(board["usage_today"], board["budget"]),
                    board["error"],
                )
                for slug, board in boards.items()
            ],
        )
    else:
        print("boards: none")


def _print_waits(document: dict[str, Any]) -> None:
    """What keeps tasks from being claimed: the storm breaker's trips, the tasks awaiting
    approval or backing off, and the ones a stopped daemon left running."""
    boards = document["boards"]
    for trip in document["breaker"]:
        print(f"\nbroken: {printable(trip['why'])} (since {trip['tripped_at']}, "
              f"next probe {trip['probe_at']}; tasks: {', '.join(trip['tasks'])})")
    _print_listed(
        boards, "awaiting_approval",
        f"task(s) {approvals.AWAITING} ('lane-runner task approve TASK'):",
        ("board", "task", "before"),
        lambda slug, w: (slug, w["task_id"], w["before"].replace("_", " ")),
    )
    _print_listed(
        boards, "backing_off", "task(s) backing off after counted failures:",
        ("board", "task", "failures", "claimable in", "at"),
        lambda slug, b: (slug, b["task_id"], b["failures"], duration(b["seconds_left"]),
                         b["until"]),
    )
    _print_listed(
        boards, "left_running",
        "task(s) left running by a stopped daemon of this home; they resume at its next "
        "start (lane-runner run):",
        ("board", "task", "run"), lambda slug, t: (slug, t["task_id"], t["run_id"]),
    )


def _print_listed(
    boards: dict[str, Any], key: str, heading: str, columns: tuple[str, ...],
    row: Callable[[str, dict[str, Any]], tuple[Any, ...]],
) -> None:
    """One list every board's status holds under ``key``, as a table under its count."""
    listed = [(slug, each) for slug, board in boards.items() for each in board[key]]
    if listed:
        print(f"\n{len(listed)} {heading}")
        print_table(columns, [row(slug, each) for slug, each in listed])


def _print_pending(document: dict[str, Any]) -> None:
    """The accepted results the journal still holds for their boards."""
    pending = document["pending_finalizations"]
    print()
    if pending:
        print(f"{len(pending)} finalization(s) pending:")
        print_table(
            ("board", "task", "run", "state"),
            [(p["board"], p["task_id"], p["run_id"], p["state"]) for p in pending],
        )
    else:
        print("no finalizations pending")


def _print_cycling(document: dict[str, Any], now: float) -> None:
    """The tasks blocked in a row by cooldowns."""
    cycling = document["cycling"]
    if cycling:
        print()
        print(f"{len(cycling)} task(s) cycling (blocked at {document['cooldown_limit']} in a row):")
        print_table(
            ("board", "task", "cooldowns", "since", "last cause", "last reason"),
            [
                (
                    c["board"],
                    c["task_id"],
                    c["cooldowns"],
                    _ago(now, c["since"]),
                    c["last_cause"],
                    c["last_reason"],
                )
                for c in cycling
            ],
        )


def _metrics_url(daemon: dict[str, Any]) -> str:
    """Where the daemon serves its metrics and probes (an IPv6 address in brackets); a
    daemon of a version that did not publish its address bound loopback."""
    address = daemon.get("metrics_address") or "127.0.0.1"
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{daemon['metrics_port']}/metrics"
