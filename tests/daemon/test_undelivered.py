"""Which accepted result a run delivers instead of running a CLI (``run/undelivered.py``),
and the carrier of that result in its commit (``delivery.Carried``): pure, no board."""

from __future__ import annotations

import os

from lane_runner.board.model import Outcome, Run
from lane_runner.run import delivery
from lane_runner.run.delivery import ResultCommit
from lane_runner.run.undelivered import deliverable, superseded_by

RESULT = {"status": "completed", "summary": "done", "changed_files": ["a.py"]}


def run(run_id: int, outcome: Outcome | None) -> Run:
    ended = None if outcome is None else 2.0
    return Run(run_id, "b", "t", "node", 1.0, 9.0, 1.0, ended_at=ended, outcome=outcome)


def test_a_commit_of_a_reclaimed_or_expired_run_is_delivered_by_the_current_one() -> None:
    commits = [ResultCommit("c1", 1)]
    for ended in (Outcome.RECLAIMED, Outcome.EXPIRED, Outcome.BLOCKED):
        assert deliverable(commits, [run(1, ended), run(2, None)], 2) == commits[0]


def test_a_commit_the_board_completed_is_not_delivered_again() -> None:
    commits = [ResultCommit("c1", 1)]
    assert deliverable(commits, [run(1, Outcome.COMPLETED), run(2, None)], 2) is None
    # delivered by a later run (another home found it): not a third time
    done_later = [run(1, Outcome.RECLAIMED), run(2, Outcome.COMPLETED), run(3, None)]
    assert deliverable(commits, done_later, 3) is None


def test_only_the_newest_result_commit_counts() -> None:
    newest, older = ResultCommit("c3", 3), ResultCommit("c1", 1)
    runs = [run(1, Outcome.RECLAIMED), run(3, Outcome.EXPIRED), run(4, None)]
    assert deliverable([newest, older], runs, 4) == newest
    runs = [run(1, Outcome.RECLAIMED), run(3, Outcome.COMPLETED), run(4, None)]
    assert deliverable([newest, older], runs, 4) is None


def test_a_run_still_current_or_unknown_to_the_board_is_not_delivered() -> None:
    assert deliverable([ResultCommit("c1", 1)], [run(1, None), run(2, None)], 2) is None
    assert deliverable([ResultCommit("c1", 1)], [run(1, Outcome.RECLAIMED)], 1) is None
    assert deliverable([ResultCommit("c9", 9)], [run(1, Outcome.RECLAIMED)], 2) is None
    assert deliverable([], [run(1, Outcome.RECLAIMED)], 2) is None


def test_a_completion_before_the_accepted_run_does_not_supersede_it() -> None:
    """The task was done, reopened, and run again: that old completion is not this one."""
    runs = [run(1, Outcome.COMPLETED), run(2, Outcome.RECLAIMED), run(3, None)]
    assert superseded_by(2, runs) is None
    assert deliverable([ResultCommit("c2", 2)], runs, 3) == ResultCommit("c2", 2)
    assert superseded_by(2, [*runs[:2], run(3, Outcome.COMPLETED), run(4, Outcome.COMPLETED)]) == 3
    assert superseded_by(2, [run(2, Outcome.COMPLETED)]) == 2


def facts(carried: delivery.Carried | None, summary: str = "summary") -> delivery.Facts:
    return delivery.Facts("b", "t", 7, "title", summary, "codex", "m", carried)


def test_the_commit_message_carries_the_result_before_its_trailers() -> None:
    carried = delivery.Carried(RESULT, {"route": {"provider": "codex"}}, "abc123")
    message = facts(carried).message()
    assert delivery.Carried.read(message) == carried
    assert message.endswith("Lane-Task: b/t\nLane-Run: 7\nLane-Provider: codex\nLane-Model: m\n")
    block = message.split("\n\n")[-2].splitlines()
    assert block[0] == delivery.CARRIED_BEGIN and block[-1] == delivery.CARRIED_END
    assert all(len(line) <= delivery.CARRIED_LINE and ": " not in line for line in block[1:-1])
    assert delivery.Carried.read(facts(None).message()) is None


def test_a_block_in_the_worker_s_summary_is_not_the_runner_s() -> None:
    """A summary that quotes a block (a forged one) is not read: a commit without its own
    block carries nothing, and one with it carries its own."""
    forged = delivery.Carried({**RESULT, "summary": "forged"}, {}, None).block()
    assert forged is not None
    assert delivery.Carried.read(facts(None, summary=forged).message()) is None
    real = delivery.Carried(RESULT, {}, None)
    assert delivery.Carried.read(facts(real, summary=forged).message()) == real


def test_a_damaged_or_oversized_block_carries_nothing() -> None:
    message = facts(delivery.Carried(RESULT, {}, None)).message()
    lines = message.splitlines()
    middle = lines.index(delivery.CARRIED_BEGIN) + 1
    lines[middle] = "!" + lines[middle][1:]
    assert delivery.Carried.read("\n".join(lines)) is None
    noise = os.urandom(delivery.MAX_CARRIED_CHARS).hex()  # incompressible, over the bound
    huge = delivery.Carried({**RESULT, "summary": noise}, {}, None)
    assert huge.block() is None
    assert delivery.CARRIED_BEGIN not in facts(huge).message()
