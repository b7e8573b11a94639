"""The boards as the console shows them: columns by status, filtered by board, lane and
workspace, and one task with everything known of it. Each read is one short board
transaction (``Board``'s methods), never held across a page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lane_runner import redact
from lane_runner.board.base import BoardError, Store
from lane_runner.board.model import BoardPause, Comment, Event, Run, Status, Task
from lane_runner.cli import evidence
from lane_runner.cli.commands.task_cmd import backoff_of, delivery_of
from lane_runner.config import Config
from lane_runner.home import Home
from lane_runner.usage import record, share
from lane_runner.web import controls

#: The columns, in the order work moves through them (archived tasks are only counted).
COLUMNS = (
    Status.TODO, Status.READY, Status.RUNNING, Status.REVIEW, Status.BLOCKED, Status.DONE
)
#: Cards drawn per column; the rest are counted ("and N more").
CARDS_PER_COLUMN = 200


@dataclass(frozen=True)
class Filters:
    """What the board page narrows to; None: everything."""

    board: str | None = None
    lane: str | None = None
    workspace: str | None = None

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filters:
        return cls(*(query.get(name) or None for name in ("board", "lane", "workspace")))

    def keeps(self, task: Task) -> bool:
        return (self.lane is None or task.assignee == self.lane) and (
            self.workspace is None or task.workspace == self.workspace
        )


@dataclass(frozen=True)
class Column:
    status: Status
    cards: tuple[Task, ...]
    count: int

    @property
    def more(self) -> int:
        return self.count - len(self.cards)


@dataclass(frozen=True)
class BoardView:
    """One board's columns, or why it could not be read."""

    slug: str
    columns: tuple[Column, ...] = ()
    paused: BoardPause | None = None
    archived: int = 0
    error: str | None = None


@dataclass(frozen=True)
class Overview:
    boards: tuple[BoardView, ...]
    slugs: tuple[str, ...]
    lanes: tuple[str, ...]
    workspaces: tuple[str, ...]
    filters: Filters


def overview(store: Store, filters: Filters) -> Overview:
    """Every board (or the one filtered to) as columns; the lanes and workspaces seen, for
    the filter menus. A board that cannot be read is shown with its error."""
    slugs = tuple(store.board_slugs())
    views: list[BoardView] = []
    lanes: set[str] = set()
    workspaces: set[str] = set()
    for slug in slugs:
        if filters.board is not None and slug != filters.board:
            continue
        try:
            board = store.board(slug)
            tasks = {status: board.list_tasks(status) for status in COLUMNS}
            counts, paused = board.counts(), board.paused()
        except BoardError as error:
            views.append(BoardView(slug, error=str(error)))
            continue
        listed = [t for each in tasks.values() for t in each]
        lanes.update(t.assignee for t in listed if t.assignee)
        workspaces.update(t.workspace for t in listed if t.workspace)
        columns = tuple(_column(status, tasks[status], filters) for status in COLUMNS)
        views.append(BoardView(slug, columns, paused, counts.get(Status.ARCHIVED, 0)))
    return Overview(tuple(views), slugs, tuple(sorted(lanes)), tuple(sorted(workspaces)), filters)


def _column(status: Status, tasks: list[Task], filters: Filters) -> Column:
    """One status's tasks the filters keep, highest priority and oldest first."""
    kept = sorted((t for t in tasks if filters.keeps(t)), key=lambda t: (-t.priority, t.created_at))
    return Column(status, tuple(kept[:CARDS_PER_COLUMN]), len(kept))


@dataclass(frozen=True)
class TaskView:
    """One task as its page and ``/api/v1/boards/<b>/tasks/<t>`` show it."""

    task: Task
    runs: list[Run]
    events: list[Event]
    comments: list[Comment]
    delivery: dict[str, Any] | None
    usage: dict[str, Any]
    backoff: dict[str, Any] | None
    evidence: Any = None
    """Checks and review evidence, as ``task show --json`` gives it under ``evidence``;
    None before the task is done."""
    controls: tuple[str, ...] = field(default=())
    """The controls that apply to the task now (``controls.applicable``)."""


def task_view(
    cfg: Config, store: Store, home: Home, slug: str, task_id: str, now: float
) -> TaskView:
    """Everything known of one task; raises NotFound for an unknown board or task."""
    board = store.board(slug)
    task = board.get_task(task_id)
    runs, events, comments = board.runs(task.id), board.events(task.id), board.comments(task.id)
    spent = share.task_usage(board, record.read(home.usage_file(slug)), task.id)
    return TaskView(
        task, runs, events, comments, delivery_of(events), spent, backoff_of(task, now),
        evidence=_evidence(task, events, spent), controls=controls.applicable(cfg, task),
    )


def _evidence(task: Task, events: list[Event], spent: dict[str, Any]) -> Any:
    """The evidence ``task show --json`` gives (``cli/evidence.py``), redacted again for
    the page; None before the task is done."""
    return redact.document(evidence.document(task, events, spent))
