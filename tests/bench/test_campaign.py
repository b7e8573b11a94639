"""The crash campaign's pure parts (bench/campaign): the seeded schedule and the
counting rules, on hand-made evidence. The campaign itself runs in
tests/postgres/test_campaign.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.campaign.drive import Plan
from bench.campaign.evidence import ours, result_commits
from bench.campaign.schedule import HOMES, MAX_DELAY, schedule, task_body
from bench.campaign.site import BOARD
from bench.campaign.tally import Edge, Evidence, ResultCommit, count
from tests.harness import git


def test_a_seed_gives_the_same_schedule_every_time() -> None:
    assert schedule(7, 200) == schedule(7, 200)
    assert [task_body(7, index) for index in range(50)] == [
        task_body(7, index) for index in range(50)
    ]
    assert schedule(7, 200) != schedule(8, 200)


def test_a_shorter_campaign_is_a_prefix_of_a_longer_one() -> None:
    """A time budget cuts the schedule short: what it ran is the seed's first steps."""
    short, long = schedule(11, 30), schedule(11, 300)
    assert long[: len(short)] == short


def test_the_kills_of_the_steps_taken_replay_exactly_those_steps() -> None:
    """What a failure prints to run it again: the seed and the kills its steps asked for."""
    long = schedule(13, 300)
    for taken in (1, 7, 40):
        kills = sum(step.kills for step in long[:taken])
        assert schedule(13, kills) == long[:taken]


def test_the_schedule_kills_daemons_both_and_clis_within_the_delay() -> None:
    steps = schedule(3, 500)
    assert sum(step.kills for step in steps) >= 500
    assert all(0 <= step.delay <= MAX_DELAY for step in steps)
    for step in steps:
        if step.cli_of is None:
            assert step.victims in ((0,), (1,), tuple(range(HOMES)))
            assert len(step.recover_first) == len(step.victims)
        else:
            assert step.victims == () and step.cli_of in range(HOMES)
    kinds = {(len(step.victims), step.cli_of is None) for step in steps}
    assert kinds == {(0, False), (1, True), (2, True)}
    assert any(step.during_start for step in steps)
    assert any(any(step.recover_first) for step in steps)
    assert {task_body(3, index) for index in range(100)} > {""}


def test_a_seed_and_its_kills_from_the_environment_replay_the_whole_schedule() -> None:
    chosen = Plan.chosen({"LANE_CAMPAIGN_SEED": "42", "LANE_CAMPAIGN_KILLS": "9"}, 400, 150.0)
    assert (chosen.seed, chosen.kills, chosen.seconds) == (42, 9, None)
    fresh = Plan.chosen({}, 400, 150.0)
    assert (fresh.kills, fresh.seconds) == (400, 150.0)
    with pytest.raises(ValueError, match="LANE_CAMPAIGN_SEED='x' is not a whole number"):
        Plan.chosen({"LANE_CAMPAIGN_SEED": "x"}, 400, 150.0)


def commit(sha: str, task: str, run: int, at: float | None = 10.0) -> ResultCommit:
    return ResultCommit(sha, task, run, at)


CLEAN = Evidence(
    tasks={"t-1": "done", "t-2": "blocked"},
    delivered={"t-1": 1},
    commits=(commit("a1", "t-1", 1),),
    accepted=frozenset({("t-1", 1)}),
    cli_runs=(Edge(5.0, "t-1"), Edge(6.0, "t-1"), Edge(7.0, "t-2")),
    pushes=(Edge(11.0, "t-1"),),
    after_done=(Edge(12.0, "t-1"),),
)


def test_a_campaign_that_did_everything_once_counts_nothing() -> None:
    counted = count(CLEAN)
    assert counted.failed() == [] and counted.examples == {}
    assert counted.tasks == 2
    assert counted.line(5, 9) == (
        "campaign: seed=5 kills=9 tasks=2 lost=0 duplicate_commits=0 second_runs=0 "
        "followups_twice=0 processes_left=0 unfinished=0 followups_missing=0 unrecorded=0"
    )


def test_a_result_run_twice_is_lost_duplicated_and_a_second_run() -> None:
    """Issue 48's first case: run 1 committed, the board shows run 2's commit on top."""
    twice = Evidence(
        tasks={"t-1": "done"},
        delivered={"t-1": 2},
        commits=(commit("a1", "t-1", 1, 10.0), commit("b2", "t-1", 2, 20.0)),
        accepted=frozenset({("t-1", 1), ("t-1", 2)}),
        cli_runs=(Edge(5.0, "t-1"), Edge(15.0, "t-1")),
    )
    counted = count(twice)
    assert (counted.lost, counted.duplicate_commits, counted.second_runs) == (1, 1, 1)
    assert counted.examples["lost"] == ("t-1 run 1",)


def test_an_accepted_result_only_a_lane_state_holds_is_lost_when_the_board_shows_another(
) -> None:
    counted = count(Evidence(tasks={"t-1": "done"}, delivered={"t-1": 3},
                             accepted=frozenset({("t-1", 2)})))
    assert counted.lost == 1
    counted = count(Evidence(tasks={"t-1": "blocked"}, delivered={},
                             commits=(commit("a1", "t-1", 1),)))
    assert counted.lost == 1


def test_a_done_task_with_no_follow_up_or_no_record_of_its_run_is_counted() -> None:
    """A recorder that records nothing would make every other count zero: the campaign
    counts done tasks its recorders missed, and the follow-ups that never ran."""
    bare = Evidence(tasks={"t-1": "done", "t-2": "blocked"}, delivered={"t-1": 1},
                    commits=(commit("a1", "t-1", 1),), cli_runs=(Edge(5.0, "t-1"),))
    counted = count(bare)
    assert (counted.followups_missing, counted.unrecorded) == (1, 0)
    counted = count(Evidence(tasks={"t-1": "done"}, delivered={}, pushes=CLEAN.pushes,
                             after_done=CLEAN.after_done))
    assert (counted.followups_missing, counted.unrecorded) == (0, 1)


def test_a_follow_up_may_repeat_only_with_one_key() -> None:
    def twice(*keys: str) -> int:
        edges = tuple(Edge(float(i), "t-1", key) for i, key in enumerate(keys))
        return count(Evidence(tasks={"t-1": "blocked"}, delivered={}, after_done=edges,
                              pushes=edges)).followups_twice

    assert twice("k") == 0
    assert twice("k", "k", "k") == 0  # at-least-once with its key
    assert twice("", "") == 2  # once for the hook, once for the push
    assert twice("k", "") == 2
    assert twice("k", "j") == 2


def test_processes_left_and_unfinished_tasks_are_counted() -> None:
    counted = count(Evidence(tasks={"t-1": "running", "t-2": "ready"}, delivered={},
                             processes_left=("123: sleep 600",)))
    assert (counted.processes_left, counted.unfinished) == (1, 2)
    assert counted.failed() == ["processes_left", "unfinished"]


def test_a_process_working_in_the_campaign_is_found_until_it_ends(tmp_path: Path) -> None:
    inside = tmp_path / "campaign" / "worktree"
    inside.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"], cwd=inside)
    try:
        assert any(line.startswith(f"{sleeper.pid}: sleep 60") for line in ours(tmp_path))
        assert not any(line.startswith(f"{sleeper.pid}:") for line in ours(tmp_path / "other"))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not any(line.startswith(f"{sleeper.pid}:") for line in ours(tmp_path))


def test_a_commit_made_and_gone_is_lost() -> None:
    counted = count(Evidence(tasks={"t-1": "done"}, delivered={"t-1": 1},
                             commits=CLEAN.commits, pushes=CLEAN.pushes,
                             after_done=CLEAN.after_done, cli_runs=CLEAN.cli_runs,
                             vanished=("f" * 40,)))
    assert counted.lost == 1
    assert counted.examples["lost"] == (f"commit {'f' * 40} (made, not in the repository)",)


def test_the_repository_is_read_past_a_worktree_whose_head_names_no_object(
    tmp_path: Path,
) -> None:
    """A ``git worktree add`` killed halfway can leave a HEAD naming an object the
    repository lacks: ``git log --all`` then exits 128 and the campaign had no counts. The
    evidence reads every other ref and worktree, and a commit seen made but absent is
    reported, not a crash."""
    repo = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
    message = f"result\n\nLane-Task: {BOARD}/t-1\nLane-Run: 3\n"
    git("commit", "-q", "--allow-empty", "-m", message, cwd=repo)
    made = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    git("worktree", "add", "-q", str(tmp_path / "half"), "-b", "half", cwd=repo)
    (repo / ".git" / "worktrees" / "half" / "HEAD").write_text("1" * 40 + "\n")
    assert subprocess.run(["git", "log", "--all"], cwd=repo, capture_output=True).returncode
    gone = "2" * 40
    commits, vanished = result_commits(repo, {made: 1.0, gone: 2.0})
    assert [(c.sha, c.task, c.run, c.made_at) for c in commits] == [(made, "t-1", 3, 1.0)]
    assert vanished == (gone,)
