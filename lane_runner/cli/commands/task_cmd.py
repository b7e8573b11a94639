"""``lane-runner task add|ls|show|comment|unblock|route|stop|archive``: filing and
inspecting tasks (``edit``, ``retry`` and ``delete`` live in ``task_change_cmd``)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import closing, suppress
from typing import Any

import orjson

from lane_runner.board import open_store
from lane_runner.board.base import Board, BoardUnavailable, HostedBoard, Store
from lane_runner.board.model import (
    Approval,
    Comment,
    Event,
    NewTask,
    Run,
    Status,
    Task,
    TaskSettings,
)
from lane_runner.board.rules import MAX_RETRIES
from lane_runner.cli import completion, dryrun, evidence
from lane_runner.cli.arguments import add_json_flag, dollars, load_config, seconds, whole
from lane_runner.cli.commands import approve_cmd, task_change_cmd
from lane_runner.cli.output import print_json, print_table, printable, timestamp
from lane_runner.cli.ranby import RanBy, ran_by
from lane_runner.cli.tasks import (
    board_of,
    checked_workspace,
    comment_document,
    event_document,
    only_board,
    read_body,
    report,
    run_document,
    task_board,
    task_document,
    task_target,
)
from lane_runner.errors import LaneRunnerError, UsageError
from lane_runner.home import Home
from lane_runner.names import PROVIDERS
from lane_runner.service import approvals, breaker
from lane_runner.usage import record, share

STOP_POLL = 0.2


class StopTimeout(LaneRunnerError):
    """``task stop --wait --timeout`` ran out before the run ended (exit 1)."""


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("task", help="file, list and inspect tasks")
    commands = group.add_subparsers(dest="task_command", metavar="ACTION", required=True)

    _register_add(commands)

    listing = commands.add_parser("ls", help="list tasks")
    listing.add_argument("--board", help="one board (default: all boards)")
    listing.add_argument("--status", choices=[s.value for s in Status])
    add_json_flag(listing)
    listing.set_defaults(handler=list_tasks)

    show = commands.add_parser("show", help="a task with its runs, events, comments, result")
    task_target(show)
    show.set_defaults(handler=show_task)

    comment = commands.add_parser("comment", help="add a comment to a task")
    task_target(comment)
    comment.add_argument("text")
    comment.add_argument("--author", default="operator")
    comment.set_defaults(handler=comment_task)

    unblock = commands.add_parser("unblock", help="return a blocked task to ready")
    task_target(unblock)
    unblock.set_defaults(handler=unblock_task)

    route = commands.add_parser(
        "route",
        help="claim nothing: print where the task would run, with which argv "
        "(exit 1 when it cannot be routed)",
    )
    task_target(route)
    route.set_defaults(handler=route_task)

    _register_stop(commands)

    archive = commands.add_parser("archive", help="archive a task that is not running")
    task_target(archive)
    archive.set_defaults(handler=archive_task)

    task_change_cmd.register_actions(commands)
    approve_cmd.register_actions(commands)


def _register_add(commands: Any) -> None:
    """``task add``: what a task is filed with."""
    add = commands.add_parser("add", help="file a task on a board")
    add.add_argument("--board", help="the board (default: the home's one board)")
    add.add_argument("--title", required=True)
    body = add.add_mutually_exclusive_group()
    body.add_argument("--body", default="", help="the task text")
    body.add_argument("--body-file", help="read the task text from a file ('-' for stdin)")
    add.add_argument("--id", help="the task id (default: a generated t-<8 hex>)")
    add.add_argument("--assignee", help=f"cli-auto or cli-<{'|'.join(PROVIDERS)}>-<effort>")
    add.add_argument(
        "--workspace",
        help="the git repository the task works in (checked now: it must have a commit); "
        "needed unless the board's host makes workspaces (Hermes)",
    )
    add.add_argument("--parent", action="append", default=[], help="a parent task (repeatable)")
    add.add_argument("--priority", type=int, default=0, help="higher runs first (default 0)")
    add.add_argument("--max-runtime", type=seconds, help="seconds per run (default: config)")
    add.add_argument("--goal-turns", type=whole(1), default=1, help="turns before giving up (1)")
    add.add_argument(
        "--max-retries",
        type=whole(0, MAX_RETRIES),
        help="counted failures retried before the task is blocked (default: failure_limit - 1)",
    )
    add.add_argument(
        "--max-cost-usd",
        type=dollars,
        help="dollars the task may spend over all its runs; then it is blocked 'budget' "
        "(default: config max_cost_usd)",
    )
    add.add_argument(
        "--max-tokens",
        type=whole(1),
        help="tokens the task may spend over all its runs (default: config max_tokens)",
    )
    add.add_argument(
        "--check", action="append", default=[], metavar="CMD",
        help="an acceptance command run in the worktree before the result is accepted "
        "(repeatable; the board's checks run too)",
    )
    add.add_argument(
        "--review", metavar="MODE",
        help="off, auto (a provider other than the implementer's) or a provider "
        "(default: the board's review)",
    )
    add.add_argument("--model", help="the model the CLI is asked for (default: its own)")
    add.add_argument(
        "--approval", choices=[a.value for a in Approval],
        help="wait for a person's approval before the run or before the push "
        "(default: the board's approval)",
    )
    add_json_flag(add)
    add.set_defaults(handler=add_task)


def _register_stop(commands: Any) -> None:
    """``task stop``: how a running task's run is ended."""
    stop = commands.add_parser(
        "stop", help="end a running task's run: its process tree is killed, it is not a failure"
    )
    task_target(stop)
    stop.add_argument("--reason", default="stopped by an operator", help="recorded on the run")
    stop.add_argument(
        "--requeue", action="store_true", help="back to ready instead of blocked"
    )
    stop.add_argument("--wait", action="store_true", help="return once the run has ended")
    stop.add_argument("--timeout", type=seconds, help="with --wait: give up after this many s")
    stop.set_defaults(handler=stop_task)


def _store(args: argparse.Namespace) -> Store:
    return open_store(load_config(args))


# -- handlers ----------------------------------------------------------------------


def add_task(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    new = NewTask(
        title=args.title,
        body=read_body(args),
        id=args.id,
        assignee=args.assignee,
        priority=args.priority,
        parents=tuple(args.parent),
        workspace=checked_workspace(cfg, args.workspace) if args.workspace else None,
        max_runtime=args.max_runtime,
        goal_turns=args.goal_turns,
        max_retries=args.max_retries,
        max_cost_usd=args.max_cost_usd,
        max_tokens=args.max_tokens,
        settings=TaskSettings(
            checks=tuple(args.check), review=args.review, model=args.model,
            approval=Approval(args.approval) if args.approval else None,
        ),
    )
    with closing(open_store(cfg)) as store:
        board = store.board(only_board(store, args.board))
        if new.workspace is None and not isinstance(board, HostedBoard):
            raise UsageError(
                "task add: name the git repository the task works in with --workspace PATH; "
                "without one its run would be blocked (capability)"
            )
        task = board.add_task(new)
    if args.json:
        print_json(task_document(task))
    else:
        print(f"added {task.board}/{task.id} ({task.status})")
    return 0


def _boards(store: Store, slug: str | None) -> list[Board]:
    """The named board, or every board that can be read.

    A broken board is skipped: the store has already logged it, and one bad file
    must not hide the tasks on the others.
    """
    if slug is not None:
        return [store.board(slug)]
    boards = []
    for each in store.board_slugs():
        with suppress(BoardUnavailable):
            boards.append(store.board(each))
    return boards


def list_tasks(args: argparse.Namespace) -> int:
    """The tasks, with who ran each last (provider, node) and why a blocked one is."""
    status = Status(args.status) if args.status else None
    cfg = load_config(args)
    home = Home(cfg.home)
    rows: list[tuple[Task, RanBy]] = []
    with closing(open_store(cfg)) as store:
        for board in _boards(store, args.board):
            who = ran_by(board, home.lane_dir(board.slug))
            rows += [(task, who.get(task.id, RanBy())) for task in board.list_tasks(status)]
    if args.json:
        print_json([{**task_document(t), "provider": r.provider, "node": r.node,
                     "awaiting_approval": approvals.awaiting(cfg, t)} for t, r in rows])
        return 0
    print_table(
        ("board", "id", "status", "assignee", "provider", "node", "priority", "updated", "title",
         "blocked because"),
        [
            (t.board, t.id, approvals.shown_status(cfg, t), t.assignee, r.provider, r.node,
             t.priority,
             timestamp(t.updated_at), _cut(t.title), _cut(t.block_reason))
            for t, r in rows
        ],
    )
    return 0


#: A column of free text in ``task ls`` is cut to this many characters (``show`` has it all).
SHOWN = 60


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= SHOWN:
        return text
    return text[: SHOWN - 1] + "…"


def show_task(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    with closing(open_store(cfg)) as store:
        board = task_board(store, args)
        task = board.get_task(args.task)
        runs, events, comments = board.runs(task.id), board.events(task.id), board.comments(task.id)
        home = Home(cfg.home)
        spent = share.task_usage(board, record.read(home.usage_file(task.board)), task.id)
    held = _held(task, home)
    if args.json:
        print_json(
            {
                **task_document(task),
                "runs": [run_document(run) for run in runs],
                "events": [event_document(event) for event in events],
                "comments": [comment_document(comment) for comment in comments],
                "delivery": delivery_of(events),
                "backoff": backoff_of(task, time.time()),
                "held": held,
                "awaiting_approval": approvals.awaiting(cfg, task),
                "usage": spent,
                "evidence": evidence.document(task, events, spent),
            }
        )
        return 0
    _print_task(task, runs, events, comments)
    _print_backoff(backoff_of(task, time.time()))
    if held is not None:
        print(f"\nnot claimed by this runner: {held['why']}")
    _print_awaiting(approvals.awaiting(cfg, task), task)
    _print_delivery(delivery_of(events))
    _print_usage(spent)
    return 0


def _held(task: Task, home: Home) -> dict[str, Any] | None:
    """Why this home's daemon does not claim a ready task: the storm breaker marks its
    workspace or its board broken (``service/breaker.py``); None when it does not."""
    if task.status is not Status.READY:
        return None
    trip = breaker.holding(breaker.read(home.breaker_file), task.board, task.workspace)
    return None if trip is None else {"scope": trip.scope, "why": trip.describe()}


def _print_awaiting(waiting: Approval | None, task: Task) -> None:
    if waiting is not None:
        what = "its run" if waiting is Approval.BEFORE_RUN else "its push and after_done"
        print(f"\n{approvals.AWAITING}: {what} waits for 'lane-runner task approve {task.id}' "
              f"(or 'task deny {task.id} --reason ...')")


def backoff_of(task: Task, now: float) -> dict[str, Any] | None:
    """A ready task that may not be claimed yet: until when, and after how many counted
    failures (0: a cooldown, a wait for capacity or a router). None when it is claimable."""
    until = task.next_attempt_at
    if task.status is not Status.READY or until is None or until <= now:
        return None
    return {
        "until": timestamp(until),
        "seconds_left": round(until - now, 1),
        "failures": task.failure_count,
    }


def _print_backoff(backoff: dict[str, Any] | None) -> None:
    if backoff is None:
        return
    failures = backoff["failures"]
    why = f"after {failures} counted failure(s)" if failures else "cooling down"
    print(f"\nbacking off ({why}): claimable again in {backoff['seconds_left']:.0f} s, "
          f"at {backoff['until']}")


def _print_usage(spent: dict[str, Any]) -> None:
    unknown = "" if spent["cost_complete"] else " (+ spend of unknown cost)"
    print(f"\nusage: {spent['total_tokens']:,} tokens, ${spent['cost_usd']:.4f}{unknown}")
    for row in spent["by_model"]:
        print(f"  {row['provider']}/{row['model']}: {row['total_tokens']:,} tokens, "
              f"${row['cost_usd']:.4f}")
    for role, row in spent["by_role"].items():
        print(f"  {role}: {row['total_tokens']:,} tokens, ${row['cost_usd']:.4f}")


def delivery_of(events: list[Event]) -> dict[str, Any] | None:
    """The result's commit on the task's branch, as the latest completion recorded it
    (``run/delivery.py``): branch, commits, diff stat. None before one."""
    for event in reversed(events):
        if event.kind in ("completed", "replayed"):
            found = event.data.get("metadata", {}).get("delivery")
            return found if isinstance(found, dict) else None
    return None


def _print_delivery(delivered: dict[str, Any] | None) -> None:
    if delivered is None:
        return
    commits = delivered.get("commits") or []
    print(f"\ndelivery: branch {printable(str(delivered.get('branch')))}, "
          f"{len(commits)} commit(s) since {str(delivered.get('base'))[:12]}, "
          f"head {str(delivered.get('head'))[:12]}")
    print(printable(str(delivered.get("diffstat") or "(no changes)")))


def _setting_rows(settings: TaskSettings) -> dict[str, Any]:
    """The settings the task itself sets, one row each (unset ones follow the board)."""
    rows: dict[str, Any] = {f"check {n}": c for n, c in enumerate(settings.checks, 1)}
    for name in ("review", "model", "approval"):
        value = getattr(settings, name)
        if value is not None:
            rows[name] = str(value)
    return rows


def _role(run: Run) -> str:
    """``implement``, or ``review of N`` for a reviewer's run of its own (issue 41)."""
    return run.role if run.for_run is None else f"{run.role} of {run.for_run}"


def _print_task(task: Task, runs: list[Run], events: list[Event], comments: list[Comment]) -> None:
    fields = task_document(task)
    result, body = fields.pop("result"), fields.pop("body")
    fields["parents"] = ", ".join(task.parents) or None
    fields.pop("settings")
    fields.update(_setting_rows(task.settings))
    print_table(("field", "value"), list(fields.items()))
    if body:
        print(f"\nbody:\n{printable(body)}")
    print("\nruns:")
    print_table(
        ("run", "role", "node", "claimed", "lease expires", "ended", "outcome", "reason"),
        [
            (r.id, _role(r), r.node, timestamp(r.claimed_at), timestamp(r.lease_expires_at),
             timestamp(r.ended_at), r.outcome, r.reason)
            for r in runs
        ],
    )
    print("\nevents:")
    print_table(
        ("id", "at", "kind", "run", "data"),
        [(e.id, timestamp(e.at), e.kind, e.run_id, _inline(_outline(e))) for e in events],
    )
    for e in events:  # each completed run's record, as sections (cli/completion.py)
        if isinstance(e.data.get("metadata"), dict):
            print(f"\n{completion.render(f'run {e.run_id} {e.kind}:', e.data['metadata'])}")
    print("\ncomments:")
    print_table(
        ("at", "author", "comment"), [(timestamp(c.at), c.author, c.body) for c in comments]
    )
    print("\nresult:")
    print("-" if result is None else printable(_inline(result)))


def _outline(event: Event) -> dict[str, Any]:
    """An event's data for its row: a run's record is shown below the table instead."""
    if not isinstance(event.data.get("metadata"), dict):
        return event.data
    return {**{k: v for k, v in event.data.items() if k != "metadata"}, "metadata": "below"}


def _inline(data: dict[str, Any]) -> str:
    """An event's data (or a result) on one line for people: ``key=value``, nested objects
    as dotted keys (``metadata.route.provider=codex``), lists and text of several lines
    (a diff stat) as JSON, never Python's repr."""
    return " ".join(f"{key}={value}" for key, value in _flat(data, ""))


def _flat(data: dict[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if value is None:
            continue
        if isinstance(value, dict):
            yield from _flat(value, f"{name}.")
        elif isinstance(value, str) and value.isprintable():
            yield name, value
        else:
            yield name, orjson.dumps(value).decode()


def comment_task(args: argparse.Namespace) -> int:
    with closing(_store(args)) as store:
        comment = task_board(store, args).comment(args.task, args.text, author=args.author)
    if args.json:
        print_json(comment_document(comment))
    else:
        print(f"commented on {comment.board}/{comment.task_id}")
    return 0


def unblock_task(args: argparse.Namespace) -> int:
    with closing(_store(args)) as store:
        task = task_board(store, args).unblock(args.task)
    return report(args, task, "unblocked")


def route_task(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    with closing(open_store(cfg)) as store:
        slug = board_of(store, args.task, args.board)
    found = dryrun.previews(cfg, slug, args.task)
    return dryrun.show(found, args.json)


def stop_task(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.wait:
        raise UsageError("--timeout goes with --wait")
    with closing(_store(args)) as store:
        board = task_board(store, args)
        run = board.request_stop(args.task, args.reason, requeue=args.requeue)
        if args.wait:
            run = _wait_for_end(board, run, args.timeout)
        task = board.get_task(args.task)
    if args.json:
        print_json({"task": task_document(task), "run": run_document(run)})
    elif run.ended_at is None:
        print(f"stop requested for {task.board}/{task.id} run {run.id}; its runner ends it "
              "at its next heartbeat")
    else:
        print(f"stopped {task.board}/{task.id} run {run.id} (now {task.status}): {run.reason}")
    return 0


def _wait_for_end(board: Board, run: Run, timeout: float | None) -> Run:
    """Poll until the run has ended (its runner saw the request and killed the tree)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while run.ended_at is None:
        if deadline is not None and time.monotonic() >= deadline:
            raise StopTimeout(
                f"run {run.id} has not ended after {timeout:g} s; the request stays on the "
                "board for its runner (is that runner alive? 'lane-runner task show')"
            )
        time.sleep(STOP_POLL)
        run = board.get_run(run.id)
    return run


def archive_task(args: argparse.Namespace) -> int:
    with closing(_store(args)) as store:
        task = task_board(store, args).archive(args.task)
    return report(args, task, "archived")
