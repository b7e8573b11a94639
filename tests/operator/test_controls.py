"""The operator controls against a live daemon on an SQLite board (scenarios: tests/controls.py)."""

from __future__ import annotations

import httpx
import pytest

from tests import controls
from tests.harness import Lane
from tests.operator.test_commands import free_port


@pytest.fixture
def site(lane: Lane) -> Lane:
    return lane


def test_pause_survives_restart_and_drains(site: Lane) -> None:
    controls.pause_survives_restart_and_drains(site)


def test_drain_timeout(site: Lane) -> None:
    controls.drain_timeout_says_what_is_left(site)


def test_provider_cap_makes_runs_wait(site: Lane) -> None:
    controls.cap_makes_runs_wait(site)


def test_full_provider_falls_back(site: Lane) -> None:
    controls.full_provider_falls_back(site)


def test_memory_pressure_holds_claims(site: Lane) -> None:
    controls.memory_pressure_holds_claims(site)


def test_stuck_runs_warn_once(site: Lane) -> None:
    port = free_port()
    controls.stuck_runs_warn_once(
        site, port, lambda: httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    )


def test_dry_run_claims_nothing(site: Lane) -> None:
    controls.dry_run_claims_nothing(site)


def test_task_stop_from_another_shell(site: Lane) -> None:
    controls.task_stop_ends_the_tree(site, site)


def test_board_pause(site: Lane) -> None:
    controls.board_pause_holds_every_runner(site, site)


def test_max_retries(site: Lane) -> None:
    controls.max_retries_overrides_the_failure_limit(site)
