"""A task's spend by role (issue 41): each ledger record says whether an implementer or a
reviewer spent it, through the home's file and the board's shared copy (SQLite and
PostgreSQL), and every reader totals by it: ``Spend``, ``lane-runner usage --by role``,
``task show`` and ``evidence``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.board import open_store
from lane_runner.board.base import SharedLedger
from lane_runner.board.model import Event, NewTask
from lane_runner.board.sqlite import SqliteStore
from lane_runner.cli import evidence
from lane_runner.providers.usage import UsageReport, tokens
from lane_runner.usage import share
from lane_runner.usage.ledger import Attempt, Ledger
from lane_runner.usage.record import Record, Role, line, parse, read
from lane_runner.usage.spend import Spend, by_role, summarize
from tests.harness import BOARD, Lane

PRICES = {"gpt-5": {"input": 1.0, "output": 10.0}}
NOW = 1_800_000_000.0


def spent(book: Ledger, task: str, session: str, n: int, role: Role,
          provider: str = "codex", count: int = 1000) -> list[Record]:
    report = UsageReport("cumulative", session, {"gpt-5": tokens(input=count).tokens}, {})
    return book.record(Attempt(BOARD, task, 1, n, provider, role), report, PRICES, NOW)


def test_a_reviewers_record_says_its_role_and_an_implementers_line_is_as_before(
    tmp_path: Path,
) -> None:
    """Mutations: ``Attempt.role`` not put on the record (``ledger._record``); ``role``
    not written or not read back (``Record.to_dict``/``from_dict``); ``role`` written
    for an implementer too (its line would not be the line written before roles)."""
    book = Ledger(tmp_path)
    [implemented] = spent(book, "t1", "th", 1, Role.IMPLEMENT)
    [reviewed] = spent(book, "t1", "s", 2, Role.REVIEW, provider="claude")
    assert (implemented.role, reviewed.role) == (Role.IMPLEMENT, Role.REVIEW)
    assert b'"role"' not in line(implemented)
    assert json.loads(line(reviewed))["role"] == "review"
    assert [r.role for r in read(book.path(BOARD))] == [Role.IMPLEMENT, Role.REVIEW]


def test_a_record_of_a_role_this_runner_does_not_know_is_skipped_not_miscounted(
    tmp_path: Path,
) -> None:
    """Mutation: an unknown role read as an implementer's (a newer runner's spend
    counted under the wrong role)."""
    book = Ledger(tmp_path)
    [record] = spent(book, "t1", "th", 1, Role.REVIEW)
    text = line(record).replace(b'"role":"review"', b'"role":"judge"')
    assert parse(text, tmp_path / "x.jsonl") == []


def test_spend_totals_by_role_only_the_roles_that_spent() -> None:
    """Mutations: ``by_role`` grouping on another field; ``task_usage`` leaving
    ``by_role`` out or taking other tasks' records."""
    base = Record(
        id="a", at=NOW, day="2027-01-15", board=BOARD, task_id="t1", run_id=1, attempt=1,
        provider="codex", model="gpt-5", session="th", basis="cumulative",
        tokens=tokens(input=100).tokens, cost_usd=1.0, cost_source="prices",
    )
    records = [
        base,
        replace(base, id="b", attempt=2, provider="claude", cost_usd=0.5, role=Role.REVIEW),
        replace(base, id="c", attempt=3, cost_usd=2.0),
        replace(base, id="d", task_id="t2", cost_usd=8.0, role=Role.REVIEW),
    ]
    mine = [r for r in records if r.task_id == "t1"]
    roles = by_role(mine)
    assert list(roles) == ["implement", "review"]
    assert (roles["implement"]["cost_usd"], roles["implement"]["records"]) == (3.0, 2)
    assert (roles["review"]["cost_usd"], roles["review"]["total_tokens"]) == (0.5, 100)
    assert Spend(tuple(records)).task_usage("t1")["by_role"] == roles
    rows = summarize(records, ("task", "role"))
    assert [(row["task"], row["role"]) for row in rows] == [
        ("t1", "implement"), ("t1", "review"), ("t2", "review")]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_roles_hold_through_the_boards_copy_and_every_reader_totals_by_them(
    lane: Lane, backend: str, request: pytest.FixtureRequest
) -> None:
    """Two homes (an implementer's and a reviewer's runner) share a board's ledger; a
    record written before roles sits on the board too. Mutations: the role lost on the
    board's copy (the reviewer's spend read back as an implementer's by the other
    home); ``usage --by role`` not offered or grouping on another field; ``task show``
    without its ``by_role`` (``--json``) or its role lines."""
    if backend == "postgres":
        lane.write_config(board_url=request.getfixturevalue("postgres_database"))
        assert lane.cli("board", "create", BOARD).returncode == 0
    added = lane.cli("task", "add", "--board", BOARD, "--title", "reviewed elsewhere",
                     "--workspace", str(lane.repo), "--json")
    assert added.returncode == 0, added.stderr
    task_id = json.loads(added.stdout)["id"]
    mine, theirs = Ledger(lane.home.usage), Ledger(lane.root / "other-home")
    spent(mine, task_id, "th", 1, Role.IMPLEMENT)
    spent(theirs, task_id, "s", 2, Role.REVIEW, provider="claude", count=300)
    store = open_store(config.load(lane.root, {}))
    try:
        board = store.board(BOARD)
        assert isinstance(board, SharedLedger)
        assert share.send(board, theirs) == 1
        old = json.loads(line(spent(theirs, task_id, "th2", 3, Role.IMPLEMENT, count=50)[0]))
        board.record_usage([old])  # as a runner from before roles sent it
        on_board = {r.id: r.role for r in share.on_board(board, task_id=task_id)}
        assert sorted(on_board.values()) == [Role.IMPLEMENT, Role.REVIEW]
    finally:
        store.close()
    said = lane.cli("usage", "--board", BOARD, "--by", "role", "--json")
    assert said.returncode == 0, said.stderr
    rows = {row["role"]: row["tokens"]["input"] for row in json.loads(said.stdout)["rows"]}
    assert rows == {"implement": 1050, "review": 300}
    shown = json.loads(lane.cli("task", "show", "--board", BOARD, task_id, "--json").stdout)
    by = shown["usage"]["by_role"]
    assert (by["implement"]["total_tokens"], by["review"]["total_tokens"]) == (1050, 300)
    text = lane.cli("task", "show", "--board", BOARD, task_id).stdout
    assert "  review: 300 tokens" in text and "  implement: 1,050 tokens" in text


def test_evidence_reads_the_ledgers_totals_by_role_and_the_event_only_without_them(
    tmp_path: Path,
) -> None:
    """Mutations: ``evidence.document`` ignoring the ledger's ``spent`` (the completed
    event's older copy shown); or taking an empty ledger's figures over the event's (a
    home pruned on a board without a shared ledger would show no spend)."""
    store = SqliteStore(tmp_path / "boards")
    try:
        store.create_board(BOARD)
        task = store.board(BOARD).add_task(NewTask(title="done", workspace=str(tmp_path)))
    finally:
        store.close()
    then = {"implement": {"total_tokens": 1, "cost_usd": 0.0}}
    done = Event(1, BOARD, task.id, "completed", 1, NOW,
                 {"metadata": {"usage": {"task": {"records": 1}, "by_role": then}}})
    base = Record(
        id="a", at=NOW, day="2027-01-15", board=BOARD, task_id=task.id, run_id=1,
        attempt=1, provider="codex", model="gpt-5", session="th", basis="cumulative",
        tokens=tokens(input=100).tokens, cost_usd=1.0, cost_source="prices",
    )
    ledger_now = Spend((base, replace(base, id="b", role=Role.REVIEW))).task_usage(task.id)
    found = evidence.document(task, [done], ledger_now)
    assert found is not None and found["usage_by_role"] == ledger_now["by_role"]
    assert set(found["usage_by_role"]) == {"implement", "review"}
    assert found["usage"] == ledger_now
    empty = Spend(()).task_usage(task.id)
    fallback = evidence.document(task, [done], empty)
    assert fallback is not None and fallback["usage_by_role"] == then
