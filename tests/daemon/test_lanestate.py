"""The lane state file: round trip, and never trusted blindly."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from lane_runner.run import lanestate


def save(directory: Path, state: lanestate.LaneState) -> None:
    (directory / f"{state.task_id}.json").write_bytes(orjson.dumps(state.to_document()))


def test_round_trip_keeps_sessions_and_sequence(tmp_path: Path) -> None:
    state = lanestate.LaneState("b", "t1", 3, sessions={"codex": "thread-1"}, goal_turn=2)
    state.next_sequence()
    save(tmp_path, state)
    loaded = lanestate.load(tmp_path, "b", "t1", 3)
    assert (loaded.sessions, loaded.sequence, loaded.goal_turn) == ({"codex": "thread-1"}, 1, 2)


def test_a_new_run_keeps_sessions_and_sequence_but_restarts_the_goal(tmp_path: Path) -> None:
    state = lanestate.LaneState("b", "t1", 3, sessions={"claude": "s"}, goal_turn=2, sequence=5)
    save(tmp_path, state)
    loaded = lanestate.load(tmp_path, "b", "t1", 4)
    assert (loaded.run_id, loaded.sessions, loaded.sequence, loaded.goal_turn) == (
        4,
        {"claude": "s"},
        5,
        0,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p.write_bytes(b"\xff\xfe not json"),
        lambda p: p.write_bytes(orjson.dumps({"format": 1})),
        lambda p: p.mkdir(),
        lambda p: os.mkfifo(p),
        lambda p: p.symlink_to("/etc/passwd"),
    ],
    ids=["garbage", "schema-invalid", "directory", "fifo", "symlink"],
)
def test_an_untrusted_state_file_means_a_fresh_state(tmp_path: Path, make) -> None:
    make(tmp_path / "t1.json")
    loaded = lanestate.load(tmp_path, "b", "t1", 7)
    assert (loaded.run_id, loaded.sessions, loaded.sequence) == (7, {}, 0)


def test_a_state_file_naming_another_task_is_not_trusted(tmp_path: Path) -> None:
    save(tmp_path, lanestate.LaneState("b", "other", 1, sessions={"codex": "x"}))
    (tmp_path / "other.json").rename(tmp_path / "t1.json")
    assert lanestate.load(tmp_path, "b", "t1", 1).sessions == {}
