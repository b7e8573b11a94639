"""A task's own settings (checks, review, model, approval): stored whole on every SQL
backend, read back as written, checked before anything is written, changed by an edit.
Hermes boards take their tasks from Hermes's own commands (``task add`` is refused)."""

from __future__ import annotations

import pytest

from lane_runner.board.base import Board
from lane_runner.board.model import Approval, BlockKind, NewTask, TaskEdit, TaskSettings
from lane_runner.board.rows import settings_column, settings_from_column
from lane_runner.errors import UsageError
from tests.board.hermes_backend import not_on_hermes
from tests.board.test_contract import claim

pytestmark = not_on_hermes("tasks are added by Hermes's own commands")

SET = TaskSettings(
    checks=("pytest -q", "ruff check ."), review="auto", model="gpt-5.1-codex",
    approval=Approval.BEFORE_PUSH,
)


def test_settings_are_stored_and_read_back_whole(board: Board) -> None:
    added = board.add_task(NewTask(title="t", id="t1", workspace="/w", settings=SET))
    assert added.settings == SET
    assert board.get_task("t1").settings == SET
    assert board.add_task(NewTask(title="plain", id="t2")).settings == TaskSettings()


def test_a_claim_returns_the_settings(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t1", workspace="/w", settings=SET))
    assert claim(board).task.settings == SET


def test_settings_are_normalised_before_they_are_written(board: Board) -> None:
    task = board.add_task(NewTask(title="t", settings=TaskSettings(
        checks=(" pytest -q ", "", "pytest -q"), review=" ", model=" m ")))
    assert task.settings == TaskSettings(checks=("pytest -q",), model="m")


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (TaskSettings(review="Claude Code"), "use 'off', 'auto'"),
        (TaskSettings(checks=("make\x1b[2J",)), "control character"),
        (TaskSettings(checks=tuple(f"c{n}" for n in range(21))), "at most 20 checks"),
        (TaskSettings(model="m" * 5000), "longer than"),
        (TaskSettings(checks=("a\x00b",)), "NUL"),
    ],
)
def test_bad_settings_are_refused_naming_them_and_nothing_is_written(
    board: Board, settings: TaskSettings, words: str
) -> None:
    with pytest.raises(UsageError, match=words):
        board.add_task(NewTask(title="t", id="bad", settings=settings))
    assert board.list_tasks() == []


def test_an_edit_replaces_the_settings_whole_and_says_so(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t1", settings=SET))
    edited = board.edit("t1", TaskEdit(settings=TaskSettings(review="off")))
    assert edited.settings == TaskSettings(review="off")
    assert board.events("t1")[-1].data["fields"] == ["settings"]
    assert board.edit("t1", TaskEdit(settings=TaskSettings(review="off"))).updated_at \
        == edited.updated_at  # unchanged: no event, no write


def test_the_settings_block_kinds_are_storable(board: Board) -> None:
    for kind in (BlockKind.CHECKS, BlockKind.REVIEW, BlockKind.DENIED):
        board.add_task(NewTask(title=kind, id=f"t-{kind}", workspace="/w"))
        board.block(claim(board).run.id, "why", kind)
        assert board.get_task(f"t-{kind}").block_kind is kind


def test_the_column_keeps_only_what_is_set_and_passes_over_unknown_keys() -> None:
    assert settings_column(TaskSettings()) is None
    assert settings_from_column(settings_column(SET)) == SET
    assert settings_from_column('{"review": "off", "from_a_newer_runner": 1}') \
        == TaskSettings(review="off")
