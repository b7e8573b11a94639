"""The board contract (docs/ARCHITECTURE.md §5): every backend runs this suite through ``store``."""

from __future__ import annotations

from typing import Any

import pytest

from lane_runner.board import rules
from lane_runner.board.base import Board, HostedBoard, Store
from lane_runner.board.model import (
    BlockKind,
    Claim,
    CompleteOutcome,
    NewTask,
    Outcome,
    Status,
)
from lane_runner.errors import NotFound, UsageError
from tests.board.hermes_backend import (
    HERMES_EVENTS,
    HOSTED_METADATA,
    NO_REPLAY,
    OWN_CLOCK,
    PROMOTION_ORDER,
    READ_ONLY_ADD,
    READ_ONLY_ARCHIVE,
    READ_ONLY_BOARDS,
    READ_ONLY_UNBLOCK,
    not_on_hermes,
)

NODE = "node-a"
TTL = 60.0
RESULT = {"status": "completed", "summary": "ok", "changed_files": []}


def claim(board: Board, default: str = "cli-auto") -> Claim:
    claimed = board.claim(NODE, TTL, default)
    assert claimed is not None
    return claimed


def snapshot(board: Board) -> tuple[object, ...]:
    return (board.counts(), len(board.events()), [t.id for t in board.list_tasks()])


# -- boards ------------------------------------------------------------------------


@not_on_hermes(READ_ONLY_BOARDS)
def test_boards_are_created_once_and_listed(store: Store) -> None:
    store.create_board("b")
    store.create_board("a.1")
    assert list(store.board_slugs()) == ["a.1", "b"]
    assert store.board("b").slug == "b"
    with pytest.raises(UsageError, match="already exists"):
        store.create_board("b")


@not_on_hermes(READ_ONLY_BOARDS)
@pytest.mark.parametrize("slug", ["..", ".", "a/b", "", "a b"])
def test_invalid_board_names_are_refused(store: Store, slug: str) -> None:
    with pytest.raises(UsageError, match="invalid board"):
        store.create_board(slug)
    assert list(store.board_slugs()) == []


def test_unknown_board_says_how_to_create_it(store: Store) -> None:
    with pytest.raises(NotFound, match="create it with '.*boards? create nope'"):
        store.board("nope")


# -- add_task ----------------------------------------------------------------------


@not_on_hermes(READ_ONLY_ADD)
def test_add_task_defaults(board: Board) -> None:
    task = board.add_task(NewTask(title="fix it", body="details"))
    assert task.id.startswith("t-") and len(task.id) == 10
    assert (task.status, task.board, task.body, task.goal_turns) == (
        Status.READY, "main", "details", 1,
    )
    assert board.get_task(task.id) == task
    assert [e.kind for e in board.events(task.id)] == ["created"]


def test_parents_decide_todo_or_ready(board: Board) -> None:
    parent = board.add_task(NewTask(title="p", id="p"))
    child = board.add_task(NewTask(title="c", parents=("p",)))
    assert child.status is Status.TODO and child.parents == ("p",)
    board.complete(claim(board).run.id, RESULT, "done")
    assert board.get_task(parent.id).status is Status.DONE
    assert board.add_task(NewTask(title="late child", parents=("p",))).status is Status.READY


@not_on_hermes(READ_ONLY_ADD)
@pytest.mark.parametrize(
    ("new", "words"),
    [
        (NewTask(title="t", id="p"), "already exists"),
        (NewTask(title="t", id="a/b"), "invalid task id"),
        (NewTask(title="t", parents=("missing",)), "same board"),
        (NewTask(title="t", id="self", parents=("self",)), "cycle"),
        (NewTask(title="t", assignee="bob"), "invalid assignee"),
        (NewTask(title="t", body="x" * (256 * 1024 + 1)), "256 KiB"),
        (NewTask(title="t", goal_turns=0), "goal turns"),
        (NewTask(title="t", max_runtime=-1), "max runtime"),
        (NewTask(title=""), "title"),
        (NewTask(title="t", body="a\x00b"), "body contains a NUL"),
        (NewTask(title="a\x00b"), "title contains a NUL"),
    ],
)
def test_bad_tasks_write_nothing(board: Board, new: NewTask, words: str) -> None:
    board.add_task(NewTask(title="p", id="p"))
    before = snapshot(board)
    with pytest.raises(UsageError, match=words):
        board.add_task(new)
    assert snapshot(board) == before


@not_on_hermes(READ_ONLY_ADD)
def test_parent_on_another_board_is_refused(store: Store) -> None:
    store.create_board("other").add_task(NewTask(title="p", id="p"))
    main = store.create_board("main")
    with pytest.raises(UsageError, match="same board"):
        main.add_task(NewTask(title="t", parents=("p",)))
    assert main.list_tasks() == []


@not_on_hermes(READ_ONLY_ADD)
def test_archived_parent_is_refused(board: Board) -> None:
    board.add_task(NewTask(title="p", id="p"))
    board.archive("p")
    with pytest.raises(UsageError, match="archived"):
        board.add_task(NewTask(title="t", parents=("p",)))


def test_unknown_task_is_not_found(board: Board) -> None:
    for call in (
        lambda: board.get_task("nope"),
        lambda: board.runs("nope"),
        lambda: board.comments("nope"),
        lambda: board.events("nope"),
        lambda: board.comment("nope", "hi"),
        lambda: board.get_run(99),
    ):
        with pytest.raises(NotFound):
            call()


def test_list_tasks_by_status(board: Board) -> None:
    board.add_task(NewTask(title="a", id="a"))
    board.add_task(NewTask(title="b", id="b", parents=("a",)))
    assert [t.id for t in board.list_tasks()] == ["a", "b"]
    assert [t.id for t in board.list_tasks(Status.TODO)] == ["b"]
    assert board.list_tasks(Status.TODO)[0].parents == ("a",)
    assert board.counts() == {
        "todo": 1, "ready": 1, "running": 0, "done": 0, "blocked": 0, "archived": 0, "review": 0,
    }


# -- claim -------------------------------------------------------------------------


def test_claim_order_is_priority_then_age(board: Board, clock: Any) -> None:
    for task_id, priority in (("old", 0), ("high", 5), ("new", 0)):
        board.add_task(NewTask(title=task_id, id=task_id, priority=priority))
        clock.advance(1)
    order = [claim(board).task.id for _ in range(3)]
    assert order == ["high", "old", "new"]
    assert board.claim(NODE, TTL, "cli-auto") is None


def test_claim_makes_a_run_with_a_lease(board: Board, clock: Any) -> None:
    board.add_task(NewTask(title="t", id="t", assignee="cli-auto"))
    claimed = claim(board)
    assert claimed.task.status is Status.RUNNING
    assert claimed.task.current_run_id == claimed.run.id
    assert claimed.run.node == NODE
    assert claimed.run.lease_expires_at == pytest.approx(clock() + TTL)
    assert claimed.run.ended_at is None
    assert board.get_run(claimed.run.id) == claimed.run
    kinds = [(e.kind, e.run_id) for e in board.events("t")]
    assert kinds == [("created", None), ("claimed", claimed.run.id)]


@not_on_hermes(HERMES_EVENTS)
def test_a_claim_appends_claimed_and_a_heartbeat_nothing(board: Board) -> None:
    """One event per change: taking the default lane is part of the claim; a heartbeat
    changes no task."""
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    kinds = [(e.kind, e.run_id) for e in board.events()]
    assert kinds == [("created", None), ("claimed", run.id)]
    assert board.heartbeat(run.id, TTL)
    assert len(board.events()) == len(kinds)


def test_unassigned_tasks_take_the_default_assignee(board: Board) -> None:
    board.add_task(NewTask(title="open", id="open", priority=9))
    board.add_task(NewTask(title="manual", id="manual", assignee="cli-claude-low"))
    assert claim(board, default="").task.id == "manual"
    assert board.claim(NODE, TTL, "") is None
    taken = claim(board, default="cli-codex-high")
    assert (taken.task.id, taken.task.assignee) == ("open", "cli-codex-high")


def test_a_claim_reads_past_pages_of_other_lanes_tasks(board: Board) -> None:
    """The claim reads ready tasks a page at a time (sql.PICK_PAGE): ours may sit pages in."""
    for index in range(40):
        board.add_task(NewTask(title=f"not ours {index}", priority=9))
    board.add_task(NewTask(title="ours", id="ours", assignee="cli-claude-low"))
    assert claim(board, default="").task.id == "ours"
    assert board.claim(NODE, TTL, "") is None


def test_a_claim_passes_over_the_workspaces_it_is_told_to_skip(board: Board) -> None:
    """The storm breaker's workspaces: their tasks are left ready and untouched, the
    others claimed in the usual order; a task without a workspace is never skipped."""
    broken, working = "dir:/srv/broken", "dir:/srv/working"
    board.add_task(NewTask(title="b1", id="b1", priority=9, workspace=broken))
    board.add_task(NewTask(title="w1", id="w1", priority=5, workspace=working))
    board.add_task(NewTask(title="b2", id="b2", priority=5, workspace=broken))
    board.add_task(NewTask(title="none", id="none", priority=1))
    skip = {broken, "dir:/srv/elsewhere"}
    order = [claimed.task.id for claimed in iter(lambda: board.claim(NODE, TTL, "cli-auto",
                                                                       skip), None)]
    assert order == ["w1", "none"]
    assert [board.get_task(t).status for t in ("b1", "b2")] == [Status.READY] * 2
    assert [e.kind for e in board.events("b1")] == ["created"]
    assert claim(board).task.id == "b1"  # once nothing is skipped


def test_run_ids_increase(board: Board) -> None:
    for index in range(3):
        board.add_task(NewTask(title=str(index)))
    ids = [claim(board).run.id for _ in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3


# -- heartbeat ---------------------------------------------------------------------


def test_heartbeat_renews_only_the_current_run(board: Board, clock: Any) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    clock.advance(30)
    assert board.heartbeat(run.id, TTL)
    renewed = board.get_run(run.id)
    assert renewed.lease_expires_at == pytest.approx(clock() + TTL)
    assert renewed.heartbeat_at == pytest.approx(clock())
    assert board.reclaim(run.id, "restart", Outcome.RECLAIMED)
    assert not board.heartbeat(run.id, TTL)
    assert not board.heartbeat(run.id + 100, TTL)


# -- complete ----------------------------------------------------------------------


def test_complete_then_duplicate_then_stale(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    assert board.complete(run.id, RESULT, "all good") is CompleteOutcome.COMPLETED
    task = board.get_task("t")
    assert (task.status, task.completed_run_id, task.current_run_id) == (Status.DONE, run.id, None)
    assert (task.result, task.summary) == (RESULT, "all good")
    assert board.get_run(run.id).outcome is Outcome.COMPLETED
    reordered = dict(reversed(list(RESULT.items())))
    assert board.complete(run.id, reordered, "again") is CompleteOutcome.DUPLICATE
    assert board.complete(run.id, {"other": 1}, "x") is CompleteOutcome.STALE
    assert board.get_task("t") == task
    assert board.complete(run.id + 50, RESULT, "x") is CompleteOutcome.STALE


@not_on_hermes(HOSTED_METADATA)
def test_completion_metadata_is_stored_with_the_completed_event(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    metadata = {"route": {"provider": "codex", "model": "m"}, "goal_turn": 2, "note": "a\x00b"}
    assert board.complete(run.id, RESULT, "ok", metadata) is CompleteOutcome.COMPLETED
    [completed] = [e for e in board.events("t") if e.kind == "completed"]
    assert completed.run_id == run.id
    assert completed.data["metadata"] == {**metadata, "note": "a\ufffdb"}


@not_on_hermes(NO_REPLAY)
def test_replayed_completions_keep_their_metadata_and_none_is_fine(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    assert board.reclaim(run.id, "lease", Outcome.EXPIRED)
    assert board.complete(run.id, RESULT, "late", {"goal_turn": 1}) is CompleteOutcome.REPLAYED
    [replayed] = [e for e in board.events("t") if e.kind == "replayed"]
    assert replayed.data["metadata"] == {"goal_turn": 1}
    board.add_task(NewTask(title="u", id="u"))
    assert board.complete(claim(board).run.id, RESULT, "ok") is CompleteOutcome.COMPLETED
    assert "metadata" not in [e for e in board.events("u") if e.kind == "completed"][0].data


def test_complete_resets_failures_and_blocks(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    first = claim(board).run
    assert board.reclaim(first.id, "crash", Outcome.FAILED, count_failure=True, cooldown=0)
    run = claim(board).run
    assert board.get_task("t").failure_count == 1
    board.complete(run.id, RESULT, "ok")
    task = board.get_task("t")
    assert (task.failure_count, task.next_attempt_at, task.block_kind) == (0, None, None)


@not_on_hermes(NO_REPLAY)
@pytest.mark.parametrize("how", ["reclaim", "block"])
def test_replay_after_the_run_ended(board: Board, how: str) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    if how == "reclaim":
        assert board.reclaim(run.id, "restart", Outcome.RECLAIMED)
    else:
        assert board.block(run.id, "stuck", BlockKind.TRANSIENT)
    assert board.complete(run.id, RESULT, "late") is CompleteOutcome.REPLAYED
    task = board.get_task("t")
    assert (task.status, task.completed_run_id, task.block_kind) == (Status.DONE, run.id, None)
    assert board.get_run(run.id).outcome is Outcome.COMPLETED
    assert board.complete(run.id, RESULT, "late") is CompleteOutcome.DUPLICATE


@not_on_hermes(NO_REPLAY)
def test_no_replay_once_a_newer_run_exists(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    first = claim(board).run
    board.reclaim(first.id, "restart", Outcome.RECLAIMED)
    second = claim(board).run
    assert board.complete(first.id, RESULT, "old") is CompleteOutcome.STALE
    board.reclaim(second.id, "restart", Outcome.RECLAIMED)
    assert board.complete(first.id, RESULT, "old") is CompleteOutcome.STALE
    assert board.complete(second.id, RESULT, "new") is CompleteOutcome.REPLAYED


def test_archived_task_is_stale(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    board.reclaim(run.id, "restart", Outcome.RECLAIMED)
    board.archive("t")
    assert board.complete(run.id, RESULT, "x") is CompleteOutcome.STALE
    assert board.get_task("t").status is Status.ARCHIVED


def test_completion_promotes_children_whose_parents_are_all_done(board: Board) -> None:
    board.add_task(NewTask(title="a", id="a"))
    board.add_task(NewTask(title="b", id="b"))
    board.add_task(NewTask(title="both", id="both", parents=("a", "b")))
    board.add_task(NewTask(title="only a", id="only-a", parents=("a",)))
    first = claim(board)
    board.complete(first.run.id, RESULT, "ok")
    assert board.get_task("only-a").status is Status.READY
    assert board.get_task("both").status is Status.TODO
    second = claim(board)
    assert second.task.id == "b"
    board.complete(second.run.id, RESULT, "ok")
    assert board.get_task("both").status is Status.READY
    assert "promoted" in [e.kind for e in board.events("both")]


@not_on_hermes(PROMOTION_ORDER)
def test_children_are_promoted_in_task_id_order(board: Board) -> None:
    """The backends once promoted in different orders; the contract says task id order."""
    board.add_task(NewTask(title="p", id="p"))
    for child in ("c-zeta", "c-alpha", "c-mu"):  # created out of id order
        board.add_task(NewTask(title=child, id=child, parents=("p",)))
    before = len(board.events())
    board.complete(claim(board).run.id, RESULT, "ok")
    promoted = [e.task_id for e in board.events()[before:] if e.kind == "promoted"]
    assert promoted == ["c-alpha", "c-mu", "c-zeta"]


@not_on_hermes(READ_ONLY_ADD)
def test_a_missing_parent_is_named_before_an_archived_one(board: Board) -> None:
    """One error for a missing parent, whatever else is wrong, on every backend."""
    board.add_task(NewTask(title="a", id="a"))
    board.archive("a")
    with pytest.raises(UsageError, match="no parent task 'gone'.*same board"):
        board.add_task(NewTask(title="t", parents=("a", "gone")))
    assert [t.id for t in board.list_tasks()] == ["a"]


# -- block and reclaim -------------------------------------------------------------


@pytest.mark.parametrize("kind", list(BlockKind))
def test_block(board: Board, kind: BlockKind) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    assert board.block(run.id, "needs a key", kind)
    task = board.get_task("t")
    assert (task.status, task.block_reason) == (Status.BLOCKED, "needs a key")
    # Hermes has no budget, checks, review or denied kind: each waits for a person there
    # (board/hermes/rows.py)
    waits = (BlockKind.BUDGET, BlockKind.CHECKS, BlockKind.REVIEW, BlockKind.DENIED)
    for_a_person = isinstance(board, HostedBoard) and kind in waits
    assert task.block_kind is (BlockKind.NEEDS_INPUT if for_a_person else kind)
    assert (task.current_run_id, task.failure_count) == (None, 1)
    ended = board.get_run(run.id)
    assert (ended.outcome, ended.reason) == (Outcome.BLOCKED, "needs a key")
    assert not board.block(run.id, "again", kind)
    assert board.get_run(run.id).ended_at == ended.ended_at


def test_block_without_counting(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    assert board.block(claim(board).run.id, "ask", BlockKind.NEEDS_INPUT, count_failure=False)
    assert board.get_task("t").failure_count == 0


@not_on_hermes(OWN_CLOCK)
def test_reclaim_with_cooldown(board: Board, clock: Any) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    assert board.reclaim(run.id, "capacity", Outcome.FAILED, cooldown=120)
    task = board.get_task("t")
    assert (task.status, task.failure_count) == (Status.READY, 0)
    assert task.next_attempt_at == pytest.approx(clock() + 120)
    assert (board.get_run(run.id).outcome, board.get_run(run.id).reason) == (
        Outcome.FAILED, "capacity",
    )
    assert board.claim(NODE, TTL, "cli-auto") is None
    clock.advance(121)
    assert claim(board).task.id == "t"
    assert not board.reclaim(run.id, "stale", Outcome.EXPIRED)


def test_counted_failures_give_up_at_the_limit(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    for attempt in (1, 2):
        assert board.reclaim(claim(board).run.id, "crash", Outcome.FAILED, count_failure=True)
        task = board.get_task("t")
        assert (task.status, task.failure_count) == (Status.READY, attempt)
    board.reclaim(claim(board).run.id, "restart", Outcome.RECLAIMED)  # not a failure
    assert board.reclaim(claim(board).run.id, "timeout", Outcome.TIMED_OUT, count_failure=True)
    task = board.get_task("t")
    assert (task.status, task.block_kind, task.failure_count) == (
        Status.BLOCKED, BlockKind.GAVE_UP, 3,
    )
    assert "timeout" in (task.block_reason or "")
    assert board.events("t")[-1].kind == "gave_up"


def test_reclaim_refuses_end_states_that_are_not_reclaims(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    with pytest.raises(UsageError):
        board.reclaim(run.id, "x", Outcome.COMPLETED)
    assert board.get_task("t").status is Status.RUNNING


# -- unblock, archive, comments, events --------------------------------------------


@not_on_hermes(READ_ONLY_UNBLOCK)
def test_unblock(board: Board) -> None:
    board.add_task(NewTask(title="p", id="p"))
    board.add_task(NewTask(title="c", id="c", parents=("p",)))
    with pytest.raises(NotFound):
        board.unblock("nope")
    with pytest.raises(UsageError, match="not blocked"):
        board.unblock("p")
    assert board.block(claim(board).run.id, "hm", BlockKind.CAPABILITY)
    task = board.unblock("p")
    assert (task.status, task.block_reason, task.block_kind, task.failure_count) == (
        Status.READY, None, None, 0,
    )
    assert board.events("p")[-1].kind == "unblocked"


@not_on_hermes(READ_ONLY_UNBLOCK)
def test_unblock_refuses_a_task_whose_parent_is_archived(board: Board) -> None:
    """It would become todo and wait forever; the operator archives it instead."""
    board.add_task(NewTask(title="p", id="p"))
    board.complete(claim(board).run.id, RESULT, "ok")
    board.add_task(NewTask(title="c", id="c", parents=("p",)))
    assert board.block(claim(board).run.id, "hm", BlockKind.NEEDS_INPUT)
    board.archive("p")
    before = snapshot(board), board.get_task("c")
    with pytest.raises(UsageError, match="parent task 'p' is archived"):
        board.unblock("c")
    assert (snapshot(board), board.get_task("c")) == before


@not_on_hermes(READ_ONLY_ARCHIVE)
def test_archive(board: Board) -> None:
    with pytest.raises(NotFound):
        board.archive("nope")
    board.add_task(NewTask(title="t", id="t"))
    run = claim(board).run
    with pytest.raises(UsageError, match="stop it first"):
        board.archive("t")
    board.reclaim(run.id, "stop", Outcome.RECLAIMED)
    assert board.archive("t").status is Status.ARCHIVED
    assert board.events("t")[-1].kind == "archived"
    assert board.claim(NODE, TTL, "cli-auto") is None


def test_comments(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    for text in ("one", "two", "three"):
        board.comment("t", text, author="ana")
    assert [c.body for c in board.comments("t")] == ["one", "two", "three"]
    assert [c.body for c in board.comments("t", limit=2)] == ["two", "three"]
    with pytest.raises(UsageError):
        board.comment("t", "  ")
    with pytest.raises(UsageError, match="comment contains a NUL"):
        board.comment("t", "a\x00b")
    assert len(board.comments("t")) == 3


def test_a_result_made_storable_completes_on_every_backend(board: Board) -> None:
    """A model's \\u0000 would make PostgreSQL refuse the result forever."""
    board.add_task(NewTask(title="t", id="t", assignee="cli-codex-low"))
    claim = board.claim(NODE, TTL, "cli-auto")
    assert claim is not None
    result = rules.storable({"summary": "a\x00b", "findings": ["\x00"], "k\x00": 1})
    assert result == {"summary": "a\ufffdb", "findings": ["\ufffd"], "k\ufffd": 1}
    assert board.complete(claim.run.id, result, result["summary"]) is CompleteOutcome.COMPLETED
    assert board.get_task("t").result == result


def test_events_after_id_and_across_tasks(board: Board) -> None:
    board.add_task(NewTask(title="a", id="a"))
    board.add_task(NewTask(title="b", id="b"))
    every = board.events()
    assert [e.task_id for e in every] == ["a", "b"]
    assert board.events(after_id=every[0].id) == every[1:]
    assert [e.task_id for e in board.events("b")] == ["b"]


def test_running_and_expired_runs(board: Board, clock: Any) -> None:
    for task_id in ("a", "b"):
        board.add_task(NewTask(title=task_id, id=task_id))
    mine = claim(board).run
    theirs = board.claim("node-b", TTL * 2, "cli-auto")
    assert theirs is not None
    assert [r.id for r in board.running_runs()] == [mine.id, theirs.run.id]
    assert [r.id for r in board.running_runs(NODE)] == [mine.id]
    assert board.expired_runs() == []
    assert [r.id for r in board.expired_runs(clock() + TTL)] == [mine.id]
    board.complete(mine.id, RESULT, "ok")
    assert [r.id for r in board.running_runs()] == [theirs.run.id]
