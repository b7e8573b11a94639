"""``run --dry-run`` and ``task route``: what would run where, printed without claiming.

Builds the router and resolves the CLIs as the daemon would, then asks
``run/preview.py`` for each task. Nothing is claimed or started.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from contextlib import closing
from dataclasses import asdict
from typing import Any

from lane_runner.board import open_store
from lane_runner.board.base import Board, BoardUnavailable
from lane_runner.board.model import Status, Task
from lane_runner.cli.output import print_json, print_table, printable
from lane_runner.config import Config
from lane_runner.home import WIRE_SCHEMA, Home
from lane_runner.router import make_router
from lane_runner.run.preview import Preview, preview
from lane_runner.service.services import resolve_binaries


def previews(cfg: Config, board_slug: str | None, task_id: str | None) -> list[Preview]:
    """One preview per ready task (or the one named), in the order a claim would take them."""
    home = Home(cfg.home)
    router = make_router(cfg)
    try:
        binaries = resolve_binaries(cfg, home)
        with closing(open_store(cfg)) as store:
            slugs = [board_slug] if board_slug else list(store.board_slugs())
            found = []
            for slug in slugs:
                try:
                    board = store.board(slug)
                    tasks = _tasks(board, task_id)
                except BoardUnavailable:
                    if board_slug:
                        raise
                    continue  # one unreadable board must not hide the others' routes
                found += [
                    preview(
                        task,
                        board,
                        cfg=cfg,
                        router=router,
                        binaries=binaries,
                        schema_path=home.root / WIRE_SCHEMA,
                    )
                    for task in tasks
                ]
            return found
    finally:
        router.close()


def _tasks(board: Board, task_id: str | None) -> Sequence[Task]:
    if task_id is not None:
        return [board.get_task(task_id)]
    ready = board.list_tasks(Status.READY)
    return sorted(ready, key=lambda t: (-t.priority, t.created_at))


#: Exit status when a task could not be routed: the printed preview names the error.
EXIT_ERROR = 1


def show(found: list[Preview], as_json: bool) -> int:
    """Print the previews; the exit status: ``EXIT_ERROR`` when any says error, else 0."""
    status = EXIT_ERROR if any(item.error for item in found) else 0
    if as_json:
        print_json([asdict(item) for item in found])
        return status
    if not found:
        print("no ready task to route")
        return status
    for item in found:
        route = item.route or {}
        print(f"{item.board}/{item.task_id}: {item.title}")
        print_table(("field", "value"), _fields(item, route))
        for title, prompt in _prompts(item):
            print(f"\n{title}:")
            print("\n".join(f"  {printable(line)}" for line in prompt.splitlines()))
        print()
    return status


def _fields(item: Preview, route: dict[str, Any]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [
        ("lane", item.lane),
        ("provider", route.get("provider")),
        ("model", route.get("model")),
        ("effort", route.get("effort")),
        ("why", route.get("reason")),
        ("workspace", item.workspace),
        ("argv", shlex.join(item.argv) if item.argv else None),
    ]
    rows += [("environment", f"{name}={value}") for name, value in item.environment.items()]
    rows += [("note", note) for note in item.notes]
    rows += _verification(item.verification)
    if item.error:
        rows.append(("error", item.error))
    return rows


def _verification(shown: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The checks and the review a run's answers would meet, and where each came from."""
    if shown is None:
        return []
    sources = shown["sources"]
    rows: list[tuple[str, Any]] = [
        ("check", f"{command}  [{sources['checks']}]") for command in shown["checks"]
    ]
    rows.append(("review", f"{shown['review']}  [{sources['review']}]"))
    rows += [(key.replace("_", " "), f"{shown[key]}  [{sources[key]}]")
             for key in ("check_turns", "review_rounds")]
    reviewer = shown["reviewer"]
    if reviewer is not None:
        rows.append(("reviewer", f"{reviewer['provider']}/{reviewer['model']}"))
    if shown["workflow_problem"]:
        rows.append(("workflow", f"ignored: {shown['workflow_problem']}"))
    return rows


def _prompts(item: Preview) -> list[tuple[str, str]]:
    """The worker's first prompt, a resumed turn's, and the reviewer's (placeholders for
    what only the run knows: the implementer's summary, the diff, the feedback)."""
    found = [("worker prompt", item.prompt)] if item.prompt else []
    if item.resumed_prompt:
        found.append(("resumed turn prompt", item.resumed_prompt))
    review = (item.verification or {}).get("review_prompt")
    return found + ([("review prompt", review)] if review else [])
