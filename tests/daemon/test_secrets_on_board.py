"""Secrets a hook or a router echoes never reach the board, ``task show`` or ``--json``
(issue 48, item 5), on the embedded board and on a shared PostgreSQL one.

Each case runs the real path: a real daemon (or ``lane-runner cleanup``), a real hook in
a real worktree, a real loopback HTTP router; then it reads the board and every command's
output looking for the planted secrets.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from lane_runner.board.base import Board
from lane_runner.board.model import NewTask, Status, Task
from tests.harness import BOARD, Lane
from tests.router.conftest import ScriptedRouter

GITHUB_TOKEN = "ghp_" + "Pl4ntedGithubT0ken" * 2
API_KEY = "Pl4ntedApiKey9"
BASIC = "Ym90OlBsNG50ZWRCYXNpYw=="
SECRETS = (GITHUB_TOKEN, API_KEY, BASIC)


@pytest.fixture(params=["sqlite", "postgres"])
def board(request: pytest.FixtureRequest, lane: Lane) -> Iterator[Board]:
    """The lane's board: its embedded one, or a board on the shared PostgreSQL server
    that the lane's daemon and commands use through ``board_url``."""
    if request.param == "sqlite":
        yield lane.board
        return
    from lane_runner.board.postgres.store import PostgresStore

    url: str = request.getfixturevalue("postgres_database")
    lane.write_config(board_url=url)
    store = PostgresStore(url)
    try:
        yield store.create_board(BOARD)
    finally:
        store.close()


def add(lane: Lane, board: Board, title: str, body: str = "") -> Task:
    return board.add_task(
        NewTask(title=title, body=body, assignee="cli-auto", workspace=str(lane.repo))
    )


def leaks(lane: Lane, board: Board, task_id: str, *more: str) -> list[str]:
    """The planted secrets found in what the board keeps of the task or in the output
    of ``task show`` (both forms) and ``more``."""
    show = ("task", "show", "--board", BOARD, task_id)
    shown = [lane.cli(*show), lane.cli(*show, "--json")]
    kept = repr([board.get_task(task_id), board.runs(task_id), board.events(task_id),
                 board.comments(task_id)])
    texts = [kept, *more, *(done.stdout + done.stderr for done in shown)]
    return [secret for secret in SECRETS if any(secret in text for text in texts)]


def test_a_cleanup_hooks_output_is_redacted_on_the_board(lane: Lane, board: Board) -> None:
    """The sweep's comments went to the board unredacted while ``after_run``'s were."""
    lane.write_config(hooks={"*": {
        "before_remove": f"echo 'mirror push https://bot:{GITHUB_TOKEN}@git.example/r.git "
                         f"failed (auth=Basic {BASIC})'; exit 1",
    }})
    task = add(lane, board, "swept")
    batch = lane.cli("run", "--until-idle")
    assert batch.returncode == 0, batch.stderr
    assert board.get_task(task.id).status is Status.DONE
    swept = lane.cli("cleanup", "--json")
    assert swept.returncode == 0, swept.stderr
    assert orjson.loads(swept.stdout)["worktrees_removed"] == [f"{BOARD}/{task.id}"]
    said = [c.body for c in board.comments(task.id) if "before_remove" in c.body]
    assert said == [
        "the before_remove hook failed with exit status 1; it said: mirror push "
        "https://bot:***@git.example/r.git failed (auth=Basic ***)"
    ]
    assert leaks(lane, board, task.id, swept.stdout, swept.stderr) == []


def test_a_routers_refusal_echoing_secrets_is_redacted_in_the_block_reason(
    lane: Lane, board: Board
) -> None:
    router = ScriptedRouter()
    try:
        echo = (
            f'{{"error": "forbidden", "request": "POST /v1?api_key={API_KEY}&model=x", '
            f'"headers": "auth=Basic {BASIC}", "hint": "token {GITHUB_TOKEN} is revoked"}}'
        )
        for _ in range(20):  # each attempt of each run asks once
            router.reply(status=403, body=echo.encode())
        lane.write_config(router_url=router.url)
        task = add(lane, board, "routed", "[sim:ok]")
        daemon = lane.start()
        lane.wait(lambda: any(run.reason for run in board.runs(task.id)),
                  what="the router's refusal to end a run", timeout=120)
        daemon.terminate()
        assert daemon.wait(timeout=60) == 0
    finally:
        router.close()
    assert router.requests, "the daemon asked the router"
    [ended, *_] = [run for run in board.runs(task.id) if run.reason]
    assert "HTTP 403" in (ended.reason or "") and "api_key=***" in (ended.reason or "")
    log = (lane.root / "daemon.log").read_text()
    assert leaks(lane, board, task.id, log) == []
