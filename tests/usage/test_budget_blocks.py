"""A task's budget blocks it, as the README says, on the embedded board and on a shared
PostgreSQL one (issue 48, item 6): a new user's ``task add --max-tokens 100`` ended
``done`` with 1,280 tokens spent and no word of it, because the answer the simulated CLI
gave before its tree was ended was accepted past the budget."""

from __future__ import annotations

import json

import pytest

from lane_runner.board.model import BlockKind, Status
from tests.harness import BOARD, Lane


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_task_past_its_token_budget_is_blocked_budget_not_done(
    lane: Lane, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        lane.write_config(board_url=request.getfixturevalue("postgres_database"))
        assert lane.cli("board", "create", BOARD).returncode == 0
    added = lane.cli("task", "add", "--board", BOARD, "--title", "small job",
                     "--workspace", str(lane.repo), "--max-tokens", "100", "--json")
    assert added.returncode == 0, added.stderr
    task_id = json.loads(added.stdout)["id"]
    batch = lane.cli("run", "--until-idle")
    assert batch.returncode == 4, batch.stderr  # the task ends blocked (docs/commands.md)
    shown = json.loads(lane.cli("task", "show", "--board", BOARD, task_id, "--json").stdout)
    assert (shown["status"], shown["block_kind"]) == (Status.BLOCKED, BlockKind.BUDGET), shown
    reason = shown["block_reason"]
    assert reason.startswith("budget spent: the task's budget of 100 tokens is spent: ")
    assert "1,280 tokens" in reason and "the worker had answered" in reason
    assert shown["usage"]["total_tokens"] == 1280
