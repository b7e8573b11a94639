"""The operator's edits (issue 27), part of the board contract (``board/base.py``): edit,
retry, delete and ``Store.delete_board`` on every backend; on a Hermes board, where
Hermes owns the tasks, each is refused naming the ``hermes kanban`` command to use."""

from __future__ import annotations

import pytest

from lane_runner.board.base import Board, Store
from lane_runner.board.model import BlockKind, NewTask, Outcome, Status, TaskEdit
from lane_runner.errors import NotFound, UsageError
from tests.board.conftest import backend_of
from tests.board.hermes_backend import not_on_hermes
from tests.board.test_contract import NODE, RESULT, TTL, claim, snapshot

READ_ONLY_EDITS = (
    "read-only command: lane-runner refuses edit, retry and delete on Hermes "
    "(test_hermes_refuses_each_naming_its_command)"
)


def blocked(board: Board, task_id: str) -> None:
    board.add_task(NewTask(title=task_id, id=task_id))
    claimed = claim(board)
    assert claimed.task.id == task_id
    assert board.block(claimed.run.id, "stuck", BlockKind.NEEDS_INPUT)


# -- edit ------------------------------------------------------------------------------


@not_on_hermes(READ_ONLY_EDITS)
def test_edit_changes_the_given_fields_and_says_which(board: Board) -> None:
    board.add_task(NewTask(title="old", id="t", assignee="cli-auto", workspace="/srv/a"))
    edited = board.edit("t", TaskEdit(
        title=" new ", body="more", assignee="cli-codex-high", priority=5, workspace="/srv/b",
        max_runtime=600.0, goal_turns=3, max_retries=2,
    ))
    assert (edited.title, edited.body, edited.assignee, edited.priority, edited.workspace,
            edited.max_runtime, edited.goal_turns, edited.max_retries) == (
        "new", "more", "cli-codex-high", 5, "/srv/b", 600.0, 3, 2)
    event = board.events("t")[-1]
    assert event.kind == "edited" and event.data["fields"] == [
        "assignee", "body", "goal_turns", "max_retries", "max_runtime", "priority", "title",
        "workspace",
    ]
    cleared = board.edit("t", TaskEdit(assignee="", workspace=""))
    assert (cleared.assignee, cleared.workspace) == (None, None)
    before = snapshot(board), board.get_task("t")
    assert board.edit("t", TaskEdit(title="new", priority=5)) == before[1]  # nothing differs
    assert (snapshot(board), board.get_task("t")) == before


@not_on_hermes(READ_ONLY_EDITS)
@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (TaskEdit(title="  "), "non-empty --title"),
        (TaskEdit(assignee="cli-gpt-high"), "invalid assignee"),
        (TaskEdit(goal_turns=0), "goal turns"),
        (TaskEdit(max_runtime=0.0), "max runtime"),
        (TaskEdit(max_retries=-1), "max retries"),
        (TaskEdit(body="a\x00b"), "NUL"),
    ],
)
def test_a_bad_edit_writes_nothing(board: Board, edit: TaskEdit, words: str) -> None:
    board.add_task(NewTask(title="t", id="t"))
    before = snapshot(board), board.get_task("t")
    with pytest.raises(UsageError, match=words):
        board.edit("t", edit)
    assert (snapshot(board), board.get_task("t")) == before


@not_on_hermes(READ_ONLY_EDITS)
def test_a_running_task_is_not_edited(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    with pytest.raises(UsageError, match="running .*stop it first"):
        board.edit("t", TaskEdit(title="other"))
    with pytest.raises(NotFound):
        board.edit("nope", TaskEdit(title="x"))
    board.reclaim(run.id, "done with it", Outcome.RECLAIMED)
    assert board.edit("t", TaskEdit(title="other")).title == "other"


# -- retry -----------------------------------------------------------------------------


@not_on_hermes(READ_ONLY_EDITS)
def test_retry_reopens_a_blocked_task_with_a_comment(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t", max_retries=0))
    run = claim(board).run
    assert board.reclaim(run.id, "crashed", Outcome.FAILED, count_failure=True)
    assert board.get_task("t").block_kind is BlockKind.GAVE_UP
    task = board.retry("t", "the flaky host is fixed", author="ana")
    assert (task.status, task.block_reason, task.block_kind, task.failure_count) == (
        Status.READY, None, None, 0)
    assert board.events("t")[-1].kind == "retried"
    [comment] = board.comments("t")
    assert (comment.author, comment.body) == ("ana", "the flaky host is fixed")
    assert claim(board).task.id == "t"


@not_on_hermes(READ_ONLY_EDITS)
def test_retry_refuses_what_is_not_blocked_and_writes_nothing(board: Board) -> None:
    blocked(board, "b")
    board.add_task(NewTask(title="t", id="t"))
    before = snapshot(board), board.get_task("b")
    with pytest.raises(UsageError, match="is ready, not blocked: nothing to retry"):
        board.retry("t", "again")
    with pytest.raises(UsageError, match="comment needs some text"):
        board.retry("b", "  ")
    with pytest.raises(NotFound):
        board.retry("nope", "again")
    assert (snapshot(board), board.get_task("b")) == before
    assert board.comments("t") == board.comments("b") == []


# -- delete ----------------------------------------------------------------------------


@not_on_hermes(READ_ONLY_EDITS)
def test_delete_takes_an_archived_task_with_its_history(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    board.comment("t", "a note")
    board.complete(claim(board).run.id, RESULT, "ok")
    with pytest.raises(UsageError, match="only archived tasks are deleted.*--force"):
        board.delete("t")
    assert board.get_task("t").status is Status.DONE
    board.archive("t")
    gone = board.delete("t")
    assert (gone.id, gone.status) == ("t", Status.ARCHIVED)
    with pytest.raises(NotFound):
        board.get_task("t")
    assert board.events() == [] or all(e.task_id != "t" for e in board.events())
    board.add_task(NewTask(title="t again", id="t"))  # the id is free; run ids go on
    assert claim(board).run.id > gone.completed_run_id  # type: ignore[operator]


@not_on_hermes(READ_ONLY_EDITS)
def test_delete_force_archives_first_but_never_a_running_task(board: Board) -> None:
    board.add_task(NewTask(title="r", id="r"))
    run = claim(board).run
    with pytest.raises(UsageError, match="r is running .*stop it first"):
        board.delete("r", force=True)
    board.reclaim(run.id, "stopped", Outcome.RECLAIMED)
    assert board.delete("r", force=True).status is Status.READY  # as it was
    with pytest.raises(NotFound):
        board.delete("r")


@not_on_hermes(READ_ONLY_EDITS)
def test_delete_refuses_a_parent_a_child_waits_on(board: Board) -> None:
    board.add_task(NewTask(title="p", id="p"))
    board.add_task(NewTask(title="c", id="c", parents=("p",)))
    board.archive("p")
    with pytest.raises(UsageError, match="parent of c, waiting on it"):
        board.delete("p")
    board.archive("c")
    board.delete("p")
    assert board.get_task("c").parents == ()


# -- delete_board ----------------------------------------------------------------------


@not_on_hermes(READ_ONLY_EDITS)
def test_delete_board_refuses_while_a_task_runs_then_forces(store: Store) -> None:
    board = store.create_board("gone")
    board.add_task(NewTask(title="r", id="r"))
    board.add_task(NewTask(title="w", id="w"))
    run = claim(board).run
    with pytest.raises(UsageError, match="r is running on board 'gone'"):
        store.delete_board("gone", force=True)
    board.reclaim(run.id, "stopped", Outcome.RECLAIMED)
    with pytest.raises(UsageError, match="only archived tasks are deleted, and r, w are not"):
        store.delete_board("gone")
    assert list(store.board_slugs()) == ["gone"] and board.counts()["ready"] == 2
    assert store.delete_board("gone", force=True) == 2
    assert list(store.board_slugs()) == []
    with pytest.raises(NotFound):
        store.board("gone")
    again = store.create_board("gone")  # the name is free again, and the board empty
    assert again.list_tasks() == [] and again.claim(NODE, TTL, "cli-auto") is None


@not_on_hermes(READ_ONLY_EDITS)
def test_delete_board_of_archived_tasks_and_unknown_boards(store: Store) -> None:
    board = store.create_board("old")
    board.add_task(NewTask(title="t", id="t"))
    board.archive("t")
    store.create_board("kept").add_task(NewTask(title="k", id="k"))
    assert store.delete_board("old") == 1
    assert list(store.board_slugs()) == ["kept"]
    assert [t.id for t in store.board("kept").list_tasks()] == ["k"]
    with pytest.raises(NotFound):
        store.delete_board("nope")


# -- Hermes ----------------------------------------------------------------------------


def test_hermes_refuses_each_naming_its_command(
    request: pytest.FixtureRequest, store: Store
) -> None:
    if backend_of(request.node) != "hermes":
        pytest.skip("Hermes only: the other backends carry out these edits")
    board = store.create_board("main")
    board.add_task(NewTask(title="t", id="t"))
    for attempt, command in (
        (lambda: board.edit("t", TaskEdit(title="x")), "hermes kanban assign t PROFILE"),
        (lambda: board.retry("t", "again"), "hermes kanban unblock t --reason TEXT"),
        (lambda: board.delete("t", force=True), "hermes kanban archive t"),
        (lambda: store.delete_board("main", force=True), "hermes kanban boards rm main"),
    ):
        with pytest.raises(UsageError, match=f"Hermes owns its tasks. Use '{command}'"):
            attempt()
    assert board.get_task("t").title == "t"
