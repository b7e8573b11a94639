"""Who ran a task last, for ``task ls``: the node of its latest claim and the provider
its latest route chose, which the assignee alone does not say (``cli-auto`` is the
router's choice; a manual lane falls back to the other provider when its own is out).

Read from the board's events in one pass (``claimed`` names the node; a completion's
metadata names the route), and, for a run that has not completed, from this home's
lane state of that very run. A run of another node that has not completed shows its
node only: its route is in that node's home.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lane_runner.board.base import Board
from lane_runner.board.model import EventKind
from lane_runner.run import lanestate

COMPLETIONS = (EventKind.COMPLETED.value, EventKind.REPLAYED.value)


@dataclass(frozen=True)
class RanBy:
    provider: str | None = None
    node: str | None = None


@dataclass
class _Latest:
    run_id: int | None = None
    node: str | None = None
    provider: str | None = None


def _route_provider(data: dict[str, Any]) -> str | None:
    metadata = data.get("metadata")
    route = metadata.get("route") if isinstance(metadata, dict) else None
    provider = route.get("provider") if isinstance(route, dict) else None
    return provider if isinstance(provider, str) else None


def ran_by(board: Board, lanes_dir: Path) -> dict[str, RanBy]:
    """Each claimed task's latest runner; tasks never claimed are absent."""
    latest: dict[str, _Latest] = {}
    for event in board.events():
        if event.kind == EventKind.CLAIMED.value:
            node = event.data.get("node")
            latest[event.task_id] = _Latest(event.run_id, node if isinstance(node, str) else None)
        elif event.kind in COMPLETIONS and event.task_id in latest:
            latest[event.task_id].provider = _route_provider(event.data)
    return {
        task_id: RanBy(found.provider or _local_provider(lanes_dir, board.slug, task_id, found),
                       found.node)
        for task_id, found in latest.items()
    }


def _local_provider(lanes_dir: Path, board: str, task_id: str, found: _Latest) -> str | None:
    """The provider this home's lane state names for the task's latest run, if it ran here."""
    if found.run_id is None or not lanestate.path_for(lanes_dir, task_id).is_file():
        return None
    route = lanestate.load(lanes_dir, board, task_id, found.run_id).route or {}
    provider = route.get("provider")
    return provider if isinstance(provider, str) else None
