"""The operator's hooks around a task's worktree, run by a real daemon (issue 31)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.board.model import Status
from lane_runner.errors import UsageError
from lane_runner.run import hooks, workspace
from tests.harness import BOARD, Lane

#: Each hook appends what it was told to a file outside the worktree (inside it, the
#: line would be part of the task's commit).
RECORD = 'printf "%s|%s|%s|%s|%s|%s\\n" "$LANE_HOOK" "$LANE_BOARD" "$LANE_TASK_ID" ' \
    '"$LANE_BRANCH" "$LANE_COMMIT" "$LANE_SUMMARY" >> {log}'


def recorded(log: Path) -> list[list[str]]:
    return [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []


def head(lane: Lane, branch: str) -> str:
    return (lane.repo / ".git" / "refs" / "heads" / branch).read_text().strip()


def run_until_idle(lane: Lane, status: int = 0) -> None:
    """A batch; ``status`` 4 when a task of it ends blocked (docs/commands.md)."""
    assert lane.start("--until-idle").wait(timeout=120) == status


def test_each_hook_runs_in_order_with_the_task_in_its_environment(lane: Lane) -> None:
    log = lane.root / "hooks.log"
    record = RECORD.format(log=log)
    lane.write_config(
        hooks={BOARD: {name: record for name in ("after_create", "before_run", "after_run",
                                                 "after_done")}}
    )
    task = lane.add("hooked")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    branch = workspace.branch_name(BOARD, task.id)
    lines = recorded(log)
    assert [line[0] for line in lines] == ["after_create", "before_run", "after_run", "after_done"]
    assert all(line[1:4] == [BOARD, task.id, branch] for line in lines)
    assert lines[3][4] == head(lane, branch)  # after_done: the result's commit
    assert lines[2][5] == lines[3][5] == "simulated work done in turn 1"
    assert not any(c.body.startswith("the ") for c in lane.board.comments(task.id))


def test_a_failing_before_run_fails_the_attempt_counted_until_the_task_gives_up(
    lane: Lane,
) -> None:
    lane.write_config(failure_limit=2, hooks={"*": {"before_run": "echo no network >&2; exit 3"}})
    task = lane.add("never starts")
    run_until_idle(lane, 4)
    given_up = lane.board.get_task(task.id)
    assert given_up.status is Status.BLOCKED and given_up.block_kind == "gave_up"
    runs = lane.runs(task.id)
    assert len(runs) == 2
    assert all(
        run.reason == "the before_run hook failed with exit status 3; it said: no network"
        for run in runs
    )
    assert lane.lane_state(task.id)["attempts"] == []  # no CLI ever ran


def test_a_failing_after_create_makes_the_worktree_afresh_on_the_next_attempt(
    lane: Lane,
) -> None:
    log = lane.root / "hooks.log"
    mark = lane.root / "failed-once"
    lane.write_config(
        hooks={BOARD: {
            "after_create": f'echo "$LANE_HOOK" >> {log}; '
                            f'[ -e {mark} ] || {{ touch {mark}; exit 1; }}'
        }}
    )
    task = lane.add("created twice")
    run_until_idle(lane)
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE and done.failure_count == 0  # reset by the completion
    assert log.read_text().split() == ["after_create", "after_create"]
    first = lane.runs(task.id)[0]
    assert first.outcome == "failed" and "after_create hook failed" in (first.reason or "")


def test_a_failing_or_slow_hook_after_the_work_is_commented_and_the_task_done(
    lane: Lane,
) -> None:
    lane.write_config(
        hooks={BOARD: {"after_run": "sleep 30", "after_done": "echo gh: not found; exit 127",
                       "timeout": 1}}
    )
    task = lane.add("hooks fail late")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    said = [c.body.split("\n\nLane-Delivery: ")[0] for c in lane.board.comments(task.id)]
    assert "the after_run hook was killed: it did not finish within 1 s: killed" in said
    assert "the after_done hook failed with exit status 127; it said: gh: not found" in said


def test_hook_variables_are_escaped_and_bounded(tmp_path: Path) -> None:
    facts = hooks.Facts(
        "b", "t", "title\x1b[2J\nnext", "lane/b/t", tmp_path,
        run_id=3, commit="abc", summary="line one\nline\x07 two" + "x" * 20_000,
    )
    env = facts.environment("after_done")
    assert env["LANE_TASK_TITLE"] == "title\\x1b[2J next"
    assert env["LANE_SUMMARY"].startswith("line one\nline\\x07 two")
    assert len(env["LANE_SUMMARY"]) < hooks.MAX_SUMMARY_CHARS + 10
    assert (env["LANE_RUN_ID"], env["LANE_COMMIT"], env["LANE_HOOK"]) == ("3", "abc", "after_done")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('{main = {after_dinner = "x"}}', "is not a hook"),
        ('{"a b" = {after_done = "x"}}', "is not a board name"),
        ('{main = {after_done = ""}}', "must be a shell command"),
        ('{main = {timeout = 0}}', "expected a number"),
        ("main = 1", "expected a TOML table"),
    ],
)
def test_bad_hooks_are_refused_naming_what_is_wrong(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(UsageError, match=complaint):
        config.load(tmp_path, {"LANE_RUNNER_HOOKS": text})


def test_hooks_come_from_the_environment_as_a_toml_table(tmp_path: Path) -> None:
    loaded = config.load(tmp_path, {"LANE_RUNNER_HOOKS": '{"*" = {after_done = "true"}}'})
    assert hooks.configured(loaded.hooks, "any") == {"after_done": "true"}
