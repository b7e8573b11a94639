"""The operator controls against a live daemon on a PostgreSQL board (tests/controls.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from lane_runner.board.model import NewTask, Task
from lane_runner.board.sql.board import SqlBoard
from tests import controls
from tests.harness import cli_workers
from tests.operator.test_commands import free_port

from .conftest import BOARD, WORKSPACE, Fleet, Pod


@dataclass
class PodSite:
    """One pod of the fleet, seen as a ``controls.Site``."""

    fleet: Fleet
    pod: Pod

    def cli(self, *args: str, timeout: float = 120) -> Any:
        return self.pod.cli(*args, timeout=timeout)

    def start(self, *args: str) -> Any:
        return self.pod.start(*args)

    def write_config(self, **changes: object) -> None:
        self.pod.write_config(**changes)

    def add(self, title: str, body: str = "", assignee: str = "cli-auto", **extra: Any) -> Task:
        new = NewTask(title=title, body=body, assignee=assignee, workspace=WORKSPACE, **extra)
        return self.fleet.board.add_task(new)

    def wait(self, condition: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
        self.fleet.wait(condition, timeout, what)

    @property
    def board(self) -> SqlBoard:
        return self.fleet.board

    def live_workers(self) -> list[int]:
        return cli_workers(self.pod.node)

    def lane_state(self, task_id: str) -> dict[str, Any]:
        path = self.pod.home.lane_dir(BOARD) / f"{task_id}.json"
        return orjson.loads(path.read_bytes())  # type: ignore[no-any-return]


@pytest.fixture
def site(fleet: Fleet) -> PodSite:
    return PodSite(fleet, fleet.pod("pod-a"))


def test_pause_survives_restart_and_drains(site: PodSite) -> None:
    controls.pause_survives_restart_and_drains(site)


def test_drain_timeout(site: PodSite) -> None:
    controls.drain_timeout_says_what_is_left(site)


def test_provider_cap_makes_runs_wait(site: PodSite) -> None:
    controls.cap_makes_runs_wait(site)


def test_full_provider_falls_back(site: PodSite) -> None:
    controls.full_provider_falls_back(site)


def test_memory_pressure_holds_claims(site: PodSite) -> None:
    controls.memory_pressure_holds_claims(site)


def test_stuck_runs_warn_once(site: PodSite) -> None:
    port = free_port()
    controls.stuck_runs_warn_once(
        site, port, lambda: httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    )


def test_dry_run_claims_nothing(site: PodSite) -> None:
    controls.dry_run_claims_nothing(site)


@pytest.fixture
def other_node(fleet: Fleet) -> PodSite:
    """Another runner's home on the same board: its CLI is the operator on another node."""
    return PodSite(fleet, fleet.pod("pod-b"))


def test_task_stop_from_another_node(site: PodSite, other_node: PodSite) -> None:
    controls.task_stop_ends_the_tree(site, other_node)


def test_board_pause_from_another_node(site: PodSite, other_node: PodSite) -> None:
    controls.board_pause_holds_every_runner(site, other_node)


def test_max_retries(site: PodSite) -> None:
    controls.max_retries_overrides_the_failure_limit(site)


def test_stop_of_a_dead_runners_task_is_honoured_by_the_rescue(
    site: PodSite, other_node: PodSite
) -> None:
    site.start()
    task = site.add("owner dies", body="[sim:hang]")
    site.wait(lambda: bool(site.live_workers()), what="the hanging CLI")
    site.pod.kill()  # the owner can no longer see the request
    asked = controls.json_of(other_node.cli(
        "task", "stop", task.id, "--board", BOARD, "--reason", "owner gone", "--json"
    ))
    assert asked["run"]["ended_at"] is None and asked["run"]["stop"]["reason"] == "owner gone"
    daemon = other_node.start()
    site.wait(lambda: site.board.get_task(task.id).status.value == "blocked",
              what="the rescue to carry out the stop")
    shown = site.board.get_task(task.id)
    assert "owner gone" in (shown.block_reason or "") and shown.failure_count == 0
    controls.stop(daemon)
