"""A follow-up's comment carries its delivery key and is written once, on every backend
(SQLite, PostgreSQL, a Hermes home): a comment step cut short after the board took the
comment finds its key line there and does not write it again (``run/followup.py``)."""

from __future__ import annotations

import threading

from lane_runner.board.base import Board
from lane_runner.board.model import NewTask
from lane_runner.run import followup, lanestate


def test_a_comment_cut_short_is_found_by_its_key_and_not_written_again(board: Board) -> None:
    board.add_task(NewTask(title="t", id="t"))
    state = lanestate.LaneState("main", "t", 4)
    state.accept({"summary": "done"}, {})
    saved: list[dict[str, object]] = []
    steps = followup.Steps(state, lambda: saved.append(state.to_document()))
    notes = followup.Notes(
        lambda text: board.comment("t", text, author="lane-runner") and None,
        lambda: [c.body for c in board.comments("t")],
    )
    never = threading.Event()
    board.comment("t", "a person's words", author="ana")
    text = "pushed branch lane/main/t at 0123456789ab to origin"
    steps.state.begin_step("comment push")  # the runner died in this step, after the write
    board.comment("t", f"{text}\n\nLane-Delivery: {steps.key} push", author="lane-runner")
    steps.comment("push", text, notes, never)
    bodies = [c.body for c in board.comments("t")]
    assert bodies == ["a person's words", f"{text}\n\nLane-Delivery: {steps.key} push"]
    assert steps.key.startswith("main/t/run-4/")
    assert state.step("comment push") == lanestate.Step(ended=True, said=None) and saved

    steps.comment("after_done", "the after_done hook failed", notes, never)  # a new step
    steps.comment("after_done", "the after_done hook failed", notes, never)  # ended: skipped
    assert [c.body for c in board.comments("t")][2:] == [
        f"the after_done hook failed\n\nLane-Delivery: {steps.key} after_done"
    ]
