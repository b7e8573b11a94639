"""An accepted result's life in the lane state, as docs/delivery.md and
docs/ARCHITECTURE.md §6 tell it (issue 40), under random orders of its events:

- a result is first kept ``accepted``, then ``journaled`` once its pending record is
  durable, then ``followed`` once the board took it and its follow-ups ran; no stage is
  skipped and none is gone back to;
- a new run of the task drops a result that reached the journal, and keeps one that
  never did, for that run to deliver as its own (never a second commit, never the CLI);
- a result another run completed the task with is cleared;
- every try of one result's follow-ups has the same ``LANE_DELIVERY_ID``; a step that
  ended never runs again, one cut short runs again, told it is a repeat;
- all of it survives a restart: the state goes through its file and back.

The state is the real ``LaneState``, saved and loaded through a real file; the model is
the spec's few facts.
"""

from __future__ import annotations

import copy
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import schemas
from lane_runner.run import followup, lanestate
from lane_runner.run import stage as stages
from lane_runner.run.stage import IllegalMove, Move, Stage

BOARD, TASK = "main", "t-1"
#: What the spec allows from each stage (None: no accepted result held); nothing else.
ALLOWED: dict[Stage | None, set[Move]] = {
    None: {Move.ACCEPT},
    Stage.ACCEPTED: {Move.JOURNAL, Move.REDELIVER, Move.CLEAR},
    Stage.JOURNALED: {Move.FOLLOW, Move.CLEAR},
    Stage.FOLLOWED: {Move.CLEAR},
}
STEPS = ("push", "comment push", "after_done", "comment after_done")
answers = st.fixed_dictionaries({"status": st.just("completed"), "summary": st.text(max_size=8)})


def make(state: lanestate.LaneState, move: Move) -> Callable[[], None]:
    """The lane state's own call for ``move``."""
    calls: dict[Move, Callable[[], None]] = {
        Move.ACCEPT: lambda: state.accept({"status": "completed", "summary": "x"}, {}),
        Move.REDELIVER: state.redeliver,
        Move.JOURNAL: lambda: state.journaled({"delivery": {}}),
        Move.FOLLOW: state.followed,
        Move.CLEAR: state.delivered_elsewhere,
    }
    return calls[move]


class DeliveryLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.lanes = Path(self.directory.name)
        self.run = 1
        self.state = lanestate.LaneState(BOARD, TASK, self.run)
        self.stage: Stage | None = None  # the model: where the result stands
        self.delivering: int | None = None  # the run delivering it
        self.key: str | None = None  # its LANE_DELIVERY_ID, fixed at acceptance
        self.ended: set[str] = set()  # follow-up steps that ended
        self.begun: set[str] = set()  # follow-up steps that began

    def teardown(self) -> None:
        self.directory.cleanup()

    def _accepted(self, answering: int) -> None:
        self.stage, self.delivering = Stage.ACCEPTED, answering
        self.key = self.state.delivery_id()
        self.ended, self.begun = set(), set()

    def _save(self) -> None:
        document = self.state.to_document()
        lanestate.path_for(self.lanes, TASK).write_bytes(orjson.dumps(document))

    # -- the result's life ------------------------------------------------------------
    @precondition(lambda self: self.stage is None)
    @rule(answer=answers)
    def a_run_accepts_its_answer(self, answer: dict[str, str]) -> None:
        self.state.accept(answer, {"route": {"provider": "p"}})
        self._accepted(self.run)

    @precondition(lambda self: self.stage is None and self.run > 1)
    @rule(answer=answers, data=st.data())
    def an_earlier_runs_answer_is_found_on_the_branch(
        self, answer: dict[str, str], data: st.DataObject
    ) -> None:
        earlier = data.draw(st.integers(1, self.run - 1))
        self.state.accept(answer, {"route": {"provider": "p"}}, earlier)
        self._accepted(earlier)
        assert self.state.redeliverable()

    @precondition(lambda self: self.stage is Stage.ACCEPTED and self.delivering != self.run)
    @rule()
    def this_run_takes_the_earlier_result_up(self) -> None:
        self.state.redeliver()
        self.delivering = self.run

    @precondition(lambda self: self.stage is Stage.ACCEPTED and self.delivering == self.run)
    @rule()
    def its_pending_record_is_written(self) -> None:
        self.state.journaled({"route": {"provider": "p"}, "delivery": {"head": "abc"}})
        self.stage = Stage.JOURNALED

    @precondition(lambda self: self.stage is Stage.JOURNALED)
    @rule()
    def the_board_took_it_and_its_follow_ups_ended(self) -> None:
        self.state.followed()
        self.stage = Stage.FOLLOWED

    @precondition(lambda self: self.stage is Stage.ACCEPTED)
    @rule()
    def another_run_completed_the_task(self) -> None:
        self.state.delivered_elsewhere()
        self.stage = self.delivering = self.key = None

    # -- follow-up steps ----------------------------------------------------------------
    @precondition(lambda self: self.stage is Stage.JOURNALED)
    @rule(name=st.sampled_from(STEPS), cut_short=st.booleans())
    def a_follow_up_step_runs(self, name: str, cut_short: bool) -> None:
        steps = followup.Steps(self.state, self._save)
        assert steps.key == self.key
        stop = threading.Event()
        tries: list[bool] = []

        def action(again: bool) -> str:
            tries.append(again)
            if cut_short:
                stop.set()  # the runner's stop came while the step ran
            return f"{name} done"

        steps.once(name, action, stop)
        if name in self.ended:
            assert tries == []  # a step that ended never runs again
        else:
            assert tries == [name in self.begun]  # again: it began before and never ended
            self.begun.add(name)
            if not cut_short:
                self.ended.add(name)

    # -- restarts and new runs ------------------------------------------------------------
    @rule()
    def the_runner_restarts(self) -> None:
        self._save()
        self.state = lanestate.load(self.lanes, BOARD, TASK, self.run)

    @rule()
    def a_new_run_claims_the_task(self) -> None:
        self._save()
        self.run += 1
        self.state = lanestate.load(self.lanes, BOARD, TASK, self.run)
        if self.stage is not Stage.ACCEPTED:  # it reached the journal: the new run's is new
            self.stage = self.delivering = self.key = None

    # -- what may never happen --------------------------------------------------------------
    @invariant()
    def every_move_the_spec_does_not_allow_is_refused(self) -> None:
        """Tried on a copy at every step, so no stage is left untried."""
        for move in set(Move) - ALLOWED[self.stage]:
            trial = copy.deepcopy(self.state)
            with pytest.raises(IllegalMove):
                make(trial, move)()
            assert trial.delivery == self.state.delivery

    @invariant()
    def the_stage_is_the_one_the_spec_says(self) -> None:
        assert self.state.stage() is self.stage

    @invariant()
    def one_result_has_one_key(self) -> None:
        if self.stage is not None:
            assert self.state.delivery_id() == self.key

    @invariant()
    def only_a_result_never_journaled_crosses_into_another_run(self) -> None:
        if self.state.delivery is not None:
            assert self.state.delivery.run == self.delivering
            if self.stage is not Stage.ACCEPTED:
                assert self.delivering == self.state.run_id
        assert self.state.redeliverable() == (
            self.stage is Stage.ACCEPTED and self.delivering != self.run
        )

    @invariant()
    def the_file_it_is_saved_as_is_valid(self) -> None:
        assert schemas.first_error(lanestate.SCHEMA, self.state.to_document()) is None


TestDeliveryLifecycle = DeliveryLifecycle.TestCase
TestDeliveryLifecycle.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None
)


@pytest.mark.parametrize("stage", [None, *Stage])
@pytest.mark.parametrize("move", list(Move))
def test_the_table_allows_exactly_what_the_spec_does(stage: Stage | None, move: Move) -> None:
    if move in ALLOWED[stage]:
        stages.after(stage, move)
    else:
        with pytest.raises(IllegalMove):
            stages.after(stage, move)


@pytest.mark.parametrize("saved", ["accepted", "journaled", "followed"])
def test_a_lane_state_the_previous_version_wrote_still_loads(tmp_path: Path, saved: str) -> None:
    """The stage is kept as the same words: a file from before the enum loads as it was."""
    document = {
        "format": 1, "board": BOARD, "task_id": TASK, "run_id": 3, "route": None,
        "provider": "codex", "sessions": {}, "started": {}, "goal_turn": 1, "sequence": 2,
        "attempts": [], "updated_at": 1.0, "goal_rejections": [], "cooldowns": 0,
        "cycles": [], "retry_reason": None, "base": "abc",
        "delivery": {
            "run": 3, "accepted_run": 3, "stage": saved, "metadata": {"route": {}},
            "result": {"status": "completed", "summary": "done"},
            "steps": {"push": {"ended": True, "said": "pushed"}},
        },
    }
    lanestate.path_for(tmp_path, TASK).write_bytes(orjson.dumps(document))
    state = lanestate.saved(tmp_path, BOARD, TASK)
    assert state is not None and state.stage() is Stage(saved)
    assert state.step("push") == lanestate.Step(ended=True, said="pushed")
    assert state.to_document()["delivery"]["stage"] == saved


def test_a_load_and_a_save_leave_a_lane_state_file_byte_for_byte(tmp_path: Path) -> None:
    """The delivery record (``lanestate.Delivery``) writes what the dict it replaced
    wrote, key for key and in the same order: a file saved by a runner before it, at
    each stage and with its follow-up steps, is saved again unchanged."""
    state = lanestate.LaneState(BOARD, TASK, 3)
    state.accept({"status": "completed", "summary": "done"}, {"route": {"provider": "p"}})
    written = [orjson.dumps(state.to_document())]
    state.journaled({"route": {"provider": "p"}, "delivery": {"head": "abc"}})
    state.begin_step("push")
    state.end_step("push", "pushed")
    written.append(orjson.dumps(state.to_document()))
    state.followed()
    written.append(orjson.dumps(state.to_document()))
    old = {  # what the dict of before held after those moves, in its order
        "run": 3, "accepted_run": 3, "result": {"status": "completed", "summary": "done"},
        "metadata": {"route": {"provider": "p"}, "delivery": {"head": "abc"}},
        "stage": "followed", "steps": {"push": {"ended": True, "said": "pushed"}},
    }
    accepted = {key: old[key] for key in ("run", "accepted_run", "result")}
    accepted |= {"metadata": {"route": {"provider": "p"}}, "stage": "accepted"}
    assert orjson.loads(written[0])["delivery"] == accepted  # no steps before the first
    assert orjson.dumps(orjson.loads(written[0])["delivery"]) == orjson.dumps(accepted)
    assert orjson.dumps(orjson.loads(written[-1])["delivery"]) == orjson.dumps(old)
    for raw in written:
        lanestate.path_for(tmp_path, TASK).write_bytes(raw)
        loaded = lanestate.saved(tmp_path, BOARD, TASK)
        assert loaded is not None
        document = loaded.to_document()
        document["updated_at"] = orjson.loads(raw)["updated_at"]  # the save's own clock
        assert orjson.dumps(document) == raw
