"""The board's redaction gate (``board/gate.py``): no text the runner writes reaches a
board with a secret in it, on every backend, whichever write carries it."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from lane_runner.board.base import Board
from lane_runner.board.model import BlockKind, NewTask, Outcome
from tests.board.hermes_backend import NO_CONTROLS, READ_ONLY_UNBLOCK, not_on_hermes

NODE, TTL = "node-a", 60.0

#: One secret of each kind the gate knows, each distinct so a leak names its kind.
SECRETS = {
    "url password": "UrlPassw0rd1",
    "bare user:pass": "BarePassw0rd2",
    "query": "QuerySecr3t3",
    "basic": "dXNlcjpCYXNpYzQ=",
    "bearer": "BearerT0ken5abc",
    "github": "ghp_" + "G1thubT0kenSix" * 3,
    "anthropic": "sk-ant-api03-" + "Ant7hr0pic" * 3,
}
LEAKY = (
    f"before_remove: cloning https://bot:{SECRETS['url password']}@git.example/r.git; "
    f"mirror bot:{SECRETS['bare user:pass']}@mirror.example:r.git; "
    f"router said 403 for /v1?api_key={SECRETS['query']} with auth=Basic {SECRETS['basic']}; "
    f"Authorization: Bearer {SECRETS['bearer']}; "
    f"export GH={SECRETS['github']} KEY={SECRETS['anthropic']}"
)


def leaks(stored: object) -> list[str]:
    """The kinds of secret whose value shows anywhere in ``stored``'s text."""
    shown = repr(stored)
    return [kind for kind, secret in SECRETS.items() if secret in shown]


def everything(board: Board, task_id: str) -> list[object]:
    """All the board keeps of a task that a reader can see."""
    task = board.get_task(task_id)
    return [
        asdict(task), [asdict(r) for r in board.runs(task_id)],
        [asdict(e) for e in board.events(task_id)], [asdict(c) for c in board.comments(task_id)],
    ]


def started(board: Board) -> tuple[str, int]:
    task = board.add_task(NewTask(title="t", assignee="cli-auto"))
    claimed = board.claim(NODE, TTL, "cli-auto")
    assert claimed is not None and claimed.task.id == task.id
    return task.id, claimed.run.id


def test_a_comment_and_a_block_reason_are_stored_redacted(board: Board) -> None:
    task_id, run_id = started(board)
    board.comment(task_id, LEAKY, author="lane-runner")
    assert board.block(run_id, LEAKY, BlockKind.NEEDS_INPUT)
    assert leaks(everything(board, task_id)) == []
    assert "bot:***@git.example" in board.get_task(task_id).block_reason  # type: ignore[operator]


def test_a_reclaim_reason_is_stored_redacted(board: Board) -> None:
    task_id, run_id = started(board)
    assert board.reclaim(run_id, LEAKY, Outcome.FAILED, count_failure=True)
    assert leaks(everything(board, task_id)) == []


def test_a_completion_is_stored_redacted(board: Board) -> None:
    task_id, run_id = started(board)
    result = {"status": "completed", "summary": LEAKY, "changed_files": [LEAKY]}
    board.complete(run_id, result, LEAKY, {"route": {"why": LEAKY}})
    assert leaks(everything(board, task_id)) == []
    assert board.complete(run_id, result, LEAKY, {"route": {"why": LEAKY}}).value == "duplicate"


@not_on_hermes(READ_ONLY_UNBLOCK)
def test_a_retry_comment_is_stored_redacted(board: Board) -> None:
    task_id, run_id = started(board)
    board.block(run_id, "needs a token", BlockKind.NEEDS_INPUT)
    board.retry(task_id, LEAKY)
    assert leaks(everything(board, task_id)) == []


@not_on_hermes(NO_CONTROLS)
def test_stop_and_pause_reasons_are_stored_redacted(board: Board) -> None:
    task_id, run_id = started(board)
    board.request_stop(task_id, LEAKY, requeue=False)
    assert leaks([everything(board, task_id), board.stop_request(run_id)]) == []
    board.pause(LEAKY, by="operator")
    assert leaks(board.paused()) == []


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_is_planted_in_the_text_the_tests_write(kind: str) -> None:
    """The check above would pass on an empty text: each secret is in what is written."""
    assert SECRETS[kind] in LEAKY
