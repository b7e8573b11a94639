"""The first hour with the command line (issue 39), driven through the installed
``lane-runner`` script: a run with no CLI refuses to start, a batch says by its exit
status and ``--json`` what happened, a mistyped home or name is said to be one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from lane_runner.board.model import Status
from tests.harness import BOARD, Lane
from tests.operator.console import console

#: A PATH with the system's tools (git) and no agent CLI.
NO_CLI_PATH = "/usr/bin:/bin"


def test_a_run_without_any_cli_refuses_to_start_naming_what_to_install(lane: Lane) -> None:
    for tool in ("codex", "claude"):
        assert not any((Path(d) / tool).exists() for d in NO_CLI_PATH.split(os.pathsep))
    lane.write_config(simulate=False)
    task = lane.add("never claimed")
    done = console(lane, "run", "--until-idle", env={"PATH": NO_CLI_PATH})
    assert done.returncode == 2, done.stderr
    for named in ("codex", "claude", "codex_bin", "claude_bin", "simulate = true"):
        assert named in done.stderr, named
    assert lane.board.get_task(task.id).status is Status.READY  # nothing was claimed
    assert lane.board.runs(task.id) == []


def _batch(lane: Lane, *args: str) -> tuple[int, dict[str, Any]]:
    done = console(lane, "run", "--until-idle", "--json", *args, timeout=180)
    assert done.returncode in (0, 3, 4), done.stderr
    return done.returncode, orjson.loads(done.stdout)


def test_a_batch_that_did_everything_exits_0_and_says_so(lane: Lane) -> None:
    earlier = lane.add("done by an earlier batch")
    assert console(lane, "run", "--until-idle").returncode == 0
    task = lane.add("fine")
    code, did = _batch(lane)
    assert code == 0 and did["exit_code"] == 0 and "done" in did["meaning"]
    assert [(t["task"], t["status"]) for t in did["done"]] == [(task.id, "done")]
    assert earlier.id not in str(did)  # only what this batch ran
    assert did["counts"] == {"done": 1, "blocked": 0, "gave_up": 0, "other": 0, "waiting": 0}
    human = console(lane, "run", "--until-idle")
    assert human.returncode == 0 and "exit 0: every task the batch ran is done" in human.stdout


def test_a_batch_with_blocked_or_given_up_tasks_exits_4_naming_them(lane: Lane) -> None:
    lane.write_config(failure_limit=1)
    fine = lane.add("fine")
    stuck = lane.add("needs a person", body="[sim:blocked]")
    crashed = lane.add("crashes", body="[sim:crash]")
    code, did = _batch(lane)
    assert code == 4 and did["exit_code"] == 4 and "blocked or gave up" in did["meaning"]
    assert [t["task"] for t in did["done"]] == [fine.id]
    [blocked] = did["blocked"]
    assert (blocked["task"], blocked["status"]) == (stuck.id, "blocked")
    assert blocked["kind"] and "simulated blocker" in blocked["reason"]
    [gave_up] = did["gave_up"]
    assert (gave_up["task"], gave_up["kind"]) == (crashed.id, "gave_up") and gave_up["reason"]
    assert (did["counts"]["blocked"], did["counts"]["gave_up"]) == (1, 1)


def test_a_batch_that_left_work_waiting_exits_3_naming_it(lane: Lane) -> None:
    lane.write_config(cooldown_base=600.0, cooldown_max=600.0)
    task = lane.add("no capacity today", body="[sim:capacity]")
    code, did = _batch(lane)
    assert code == 3 and did["exit_code"] == 3 and "left waiting" in did["meaning"]
    [waiting] = did["waiting"]
    assert waiting["task"] == task.id and waiting["why"].startswith("cooling down")
    assert (did["counts"]["waiting"], did["done"], did["blocked"]) == (1, [], [])


def test_a_read_command_on_a_missing_home_names_it_and_where_it_came_from(
    lane: Lane, tmp_path: Path
) -> None:
    typo = tmp_path / "hoem"
    for argv in (["task", "ls"], ["status"], ["board", "ls"], ["usage"]):
        by_flag = console(lane, "--home", str(typo), *argv)
        assert by_flag.returncode == 2, (argv, by_flag.stderr)
        assert f"no lane-runner home at {typo} (from the --home option)" in by_flag.stderr
        assert by_flag.stdout == ""
        by_env = console(lane, *argv, env={"LANE_RUNNER_HOME": str(typo)})
        assert by_env.returncode == 2 and "(from LANE_RUNNER_HOME)" in by_env.stderr
    assert not typo.exists()  # no read made it (status made the directory and runner.lock)
    assert console(lane, "--home", str(typo), "run", "--dry-run").returncode == 2
    batch = console(lane, "--home", str(typo), "run", "--until-idle",  # the daemon makes it
                    env={"LANE_RUNNER_SIMULATE": "true"})
    assert batch.returncode == 0, batch.stderr
    made = console(lane, "--home", str(typo), "board", "create", "main")
    assert made.returncode == 0, made.stderr
    assert console(lane, "--home", str(typo), "task", "ls").returncode == 0


def test_a_bad_config_value_is_said_in_plain_words(lane: Lane) -> None:
    done = console(lane, "task", "ls", env={"LANE_RUNNER_CONCURRENCY": "two"})
    assert done.returncode == 2
    assert ("bad value for concurrency in LANE_RUNNER_CONCURRENCY: 'two' "
            "(expected a whole number from 0 to 64)") in done.stderr
    lane.write_config(lease_ttl="soon")
    done = console(lane, "task", "ls")
    assert done.returncode == 2 and "'soon' (expected a number from 1 to 2592000)" in done.stderr
    for said in (done.stderr, console(lane, "status", env={"LANE_RUNNER_BOARD_CONNECTIONS": "[]"}
                                      ).stderr):
        assert "invalid literal" not in said and "could not convert" not in said


def test_an_unknown_config_key_suggests_the_one_meant(lane: Lane) -> None:
    done = console(lane, "task", "ls", env={"LANE_RUNNER_CONCURENCY": "2"})
    assert done.returncode == 2
    assert "did you mean 'LANE_RUNNER_CONCURRENCY'?" in done.stderr
    (lane.root / "config.toml").write_text("simulate = true\nconcurency = 2\n")
    done = console(lane, "task", "ls")
    assert done.returncode == 2 and "unknown key 'concurency'" in done.stderr
    assert "did you mean 'concurrency'?" in done.stderr


def test_task_add_needs_no_board_with_one_and_refuses_a_task_without_a_workspace(
    lane: Lane,
) -> None:
    added = console(lane, "task", "add", "--title", "t", "--workspace", str(lane.repo), "--json")
    assert added.returncode == 0, added.stderr
    assert orjson.loads(added.stdout)["board"] == BOARD
    bare = console(lane, "task", "add", "--title", "no repository")
    assert bare.returncode == 2 and "--workspace PATH" in bare.stderr
    assert "blocked (capability)" in bare.stderr
    assert [t.title for t in lane.tasks()] == ["t"]  # nothing written
    lane.store.create_board("second")
    several = console(lane, "task", "add", "--title", "t", "--workspace", str(lane.repo))
    assert several.returncode == 2
    assert f"several boards (second, {BOARD}): name one with --board" in several.stderr


def test_task_retry_takes_several_ids_or_every_blocked_task_of_a_board(lane: Lane) -> None:
    first, second, third = (lane.add(f"stuck {n}", body="[sim:blocked]").id for n in range(3))
    assert console(lane, "run", "--until-idle").returncode == 4
    assert {t.status for t in lane.tasks()} == {Status.BLOCKED}
    done = console(lane, "task", "retry", first, second, "--comment", "fixed", "--json")
    assert done.returncode == 0, done.stderr
    assert [(t["id"], t["status"]) for t in orjson.loads(done.stdout)] == [
        (first, "ready"), (second, "ready")]
    assert lane.board.get_task(third).status is Status.BLOCKED
    typo = console(lane, "task", "retry", third, "nope")
    assert typo.returncode == 2 and "'nope'" in typo.stderr
    assert lane.board.get_task(third).status is Status.BLOCKED  # a typo changes nothing
    every = console(lane, "task", "retry", "--blocked", "--board", BOARD)
    assert every.returncode == 0, every.stderr
    assert every.stdout == f"retried {BOARD}/{third} (now ready)\n"
    assert {t.status for t in lane.tasks()} == {Status.READY}
    none = console(lane, "task", "retry", "--blocked")  # one board: the default
    assert (none.returncode, none.stdout) == (0, f"no blocked task on board {BOARD}\n")


def test_a_mistyped_name_suggests_the_one_meant(lane: Lane) -> None:
    task = lane.add("exists")
    cases = {
        ("staus",): "did you mean 'status'?",
        ("task", "sho", task.id): "did you mean 'show'?",
        ("task", "ls", "--status", "redy"): "did you mean 'ready'?",
        ("task", "ls", "--board", "wrok"): "no board 'wrok' (did you mean 'work'?)",
        ("task", "show", task.id[:-1]): f"(did you mean {task.id!r}?)",
        ("task", "show", task.id[:-1], "--board", BOARD): f"(did you mean {task.id!r}?)",
    }
    for argv, said in cases.items():
        done = console(lane, *argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert said in done.stderr, (argv, done.stderr)
