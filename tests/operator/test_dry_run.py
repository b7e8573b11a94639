"""``run --dry-run`` shows what a run would do (issue 29): the dry run and the executor
plan an attempt through the same code (``run/plan.py``), so each test here runs the dry
run, then the run, and holds the run to what the dry run said."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from lane_runner.board.model import NewTask
from lane_runner.providers.simulators.play import OUTPUT_FILE
from lane_runner.router import health
from tests.harness import BOARD, Lane, git


def dry_run(lane: Lane) -> dict[str, dict[str, Any]]:
    planned = lane.cli("run", "--dry-run", "--json")
    assert planned.returncode == 0, planned.stderr
    return {item["task_id"]: item for item in json.loads(planned.stdout)}


def test_the_dry_run_names_the_branch_the_run_works_on(lane: Lane) -> None:
    """A branch named like the board's folder leaves the task its flat twin branch: the dry
    run says so, and the run works there."""
    git("branch", f"lane/{BOARD}", cwd=lane.repo)
    task = lane.add("on the twin")
    shown = dry_run(lane)[task.id]
    twin = f"lane-{BOARD}-{task.id}"
    assert f"branch {twin}" in shown["notes"]
    assert lane.cli("run", "--until-idle").returncode == 0
    branches = subprocess.run(
        ["git", "branch", "--list", twin], cwd=lane.repo, capture_output=True, text=True,
        check=True,
    ).stdout
    assert twin in branches


def test_a_manual_lane_goes_where_it_names_in_the_dry_run_too(lane: Lane) -> None:
    """Provider health steers cli-auto only: a manual lane whose provider another run found
    unavailable is still routed as named, in the dry run as in the run."""
    health.record_failure(lane.home.provider_health, "claude", "capacity", "at capacity")
    task = lane.add("claude, please", assignee="cli-claude-low")
    shown = dry_run(lane)[task.id]
    assert shown["route"]["provider"] == "claude", shown
    assert lane.cli("run", "--until-idle").returncode == 0
    assert lane.lane_state(task.id)["attempts"][0]["provider"] == "claude"  # type: ignore[index]


def test_a_monorepo_folder_is_where_the_dry_run_says_the_cli_works(lane: Lane) -> None:
    """``--workspace repo/service-a``: the dry run's workspace and the CLI's working
    directory in its argv are service-a of the task's worktree, where the run works."""
    service = lane.repo / "service-a"
    service.mkdir()
    (service / "main.py").write_text("print()\n")
    git("add", ".", cwd=lane.repo)
    git("commit", "-qm", "a service", cwd=lane.repo)
    task = lane.board.add_task(
        NewTask(title="in the service", assignee="cli-codex-low", workspace=str(service))
    )
    shown = dry_run(lane)[task.id]
    where = str(lane.home.worktree(BOARD, task.id) / "service-a")
    assert shown["workspace"] == where
    assert shown["argv"][shown["argv"].index("-C") + 1] == where
    assert lane.cli("run", "--until-idle").returncode == 0
    assert (lane.home.worktree(BOARD, task.id) / "service-a" / OUTPUT_FILE).exists()
