"""Day one with the command line (issue 27): what a newcomer meets first, driven through
the installed ``lane-runner`` script: closed pipes, ``--json`` and global options on
every command, one-line errors naming the argument, help for people."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from lane_runner.board.model import NewTask
from lane_runner.cli.main import build_parser, commands
from tests.harness import BOARD, Lane
from tests.operator.console import closed_pipe, console, json_of, script

#: 128 + SIGPIPE: what a shell reports for git or kubectl whose reader went away.
READER_GONE = 141
#: ``task add`` in the lane's repository (a relative path: the console runs in the home).
ADD = ["task", "add", "--workspace", "repo"]


@pytest.mark.parametrize(
    "command",
    [["journal", "ls"], ["config", "show"], ["config", "show", "--json"], ["task", "ls"],
     ["status"], ["board", "ls", "--json"]],
)
def test_output_to_a_closed_pipe_ends_quietly(lane: Lane, command: list[str]) -> None:
    lane.add("something to list")
    pipe = closed_pipe()
    try:
        done = console(lane, *command, stdout=pipe)
    finally:
        os.close(pipe)
    assert (done.returncode, done.stderr) == (READER_GONE, "")


def test_logs_follow_ends_when_its_reader_goes_even_while_the_log_is_quiet(lane: Lane) -> None:
    log = lane.home.log_file(BOARD, "t1")
    log.parent.mkdir(parents=True)
    log.write_text('{"type":"thread.started","thread_id":"th-1"}\n' * 3)
    follower = subprocess.Popen(
        [str(script()), "--home", str(lane.root), "logs", "t1", "-f"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=lane.environ(),
    )
    assert follower.stdout is not None and follower.stderr is not None
    assert follower.stdout.readline() == "codex thread th-1\n"
    follower.stdout.close()  # `| head -1` has what it wanted and exits; nothing more is logged
    try:
        assert follower.wait(timeout=30) == READER_GONE
    finally:
        if follower.poll() is None:
            follower.send_signal(signal.SIGKILL)
    assert follower.stderr.read() == ""


def test_every_command_takes_json_and_the_global_options_after_its_name() -> None:
    leaves = [parser for parser, group in commands(build_parser()) if group is None]
    assert len(leaves) > 20  # the walk reached the commands
    for parser in leaves:
        options = parser._option_string_actions  # argparse has no public lookup
        missing = [o for o in ("--json", "--home", "--log-level", "--log-format")
                   if o not in options]
        assert not missing, f"{parser.prog} lacks {missing}"


def test_logs_and_demo_take_json(lane: Lane) -> None:
    log = lane.home.log_file(BOARD, "t1")
    log.parent.mkdir(parents=True)
    log.write_text('{"type":"thread.started","thread_id":"th-1"}\nplain note\n')
    done = console(lane, "logs", "t1", "--json")
    assert done.returncode == 0, done.stderr
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [line["event"] for line in lines] == [
        {"type": "thread.started", "thread_id": "th-1"}, None
    ]
    assert [line["text"] for line in lines] == ["codex thread th-1", "plain note"]
    assert {(line["board"], line["task"]) for line in lines} == {(BOARD, "t1")}
    demo = json_of(console(lane, "demo", "--simulated", "--json",
                           "--home", str(lane.root / "demo"), timeout=180))
    assert demo["finished"] is True and len(demo["tasks"]) == 8
    assert {task["status"] for task in demo["tasks"]} == {"done"}
    assert any(f["file"].endswith(".terminal.committed.json") for f in demo["journal"]["files"])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--bogus"], "unrecognized argument '--bogus'"),
        (["task", "ls", "--bogus"], "task ls: unrecognized argument '--bogus'"),
        (["task", "ls", "--status", "weird"], "argument --status: invalid choice: 'weird'"),
        ([*ADD, "--board", BOARD, "--title", "x", "--priority", "high"],
         "argument --priority: invalid int value: 'high'"),
        ([*ADD, "--board", BOARD, "--title", "x", "--goal-turns", "0"],
         "argument --goal-turns: at least 1, not 0"),
        ([*ADD, "--board", BOARD, "--title", "x", "--max-runtime", "-5"],
         "argument --max-runtime: more than 0 seconds, not -5"),
        ([*ADD, "--board", BOARD, "--title", "x", "--max-retries", "-1"],
         "argument --max-retries: from 0 to 1000, not -1"),
        ([*ADD, "--board", BOARD, "--title", " "], "--title"),
        ([*ADD, "--board", "nope", "--title", "x"], "'nope'"),
        ([*ADD, "--board", BOARD, "--title", "x", "--assignee", "bob"], "'bob'"),
        ([*ADD, "--board", BOARD, "--title", "x", "--parent", "zzz"], "'zzz'"),
        (["task", "show", "nope"], "'nope'"),
        (["pause", "--timeout", "5"], "--timeout"),
        (["board", "create", "a/b"], "'a/b'"),
        (["task"], "task: name an action: add, ls"),
        ([], "name a command: config, board, task"),
    ],
)
def test_an_error_is_one_line_naming_the_argument(lane: Lane, argv: list[str], named: str) -> None:
    done = console(lane, *argv)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert done.stderr.startswith("lane-runner: ") and "lane-runner: lane-runner" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_global_options_come_before_or_after_the_command(lane: Lane) -> None:
    task = lane.add("listed")
    elsewhere = {"LANE_RUNNER_HOME": str(lane.root / "elsewhere")}
    after = console(lane, "task", "ls", "--home", str(lane.root), "--json", env=elsewhere)
    before = console(lane, "--home", str(lane.root), "task", "ls", "--json", env=elsewhere)
    assert [t["id"] for t in json_of(after)] == [t["id"] for t in json_of(before)] == [task.id]
    quiet = console(lane, "status", "--log-level", "error", "--log-format", "json", "--json")
    assert json_of(quiet)["boards"][BOARD]["counts"]["ready"] == 1


def test_a_task_id_unique_in_the_home_needs_no_board(lane: Lane) -> None:
    lane.store.create_board("other")
    task = lane.add("only on work")
    shown = json_of(console(lane, "task", "show", task.id, "--json"))
    assert (shown["board"], shown["id"]) == (BOARD, task.id)
    assert console(lane, "task", "comment", task.id, "noted").returncode == 0
    lane.store.board("other").add_task(NewTask(title="same id", id=task.id))
    twice = console(lane, "task", "show", task.id)
    assert twice.returncode == 2
    assert f"task {task.id!r} is on several boards (other, {BOARD}): name one with --board" in (
        twice.stderr
    )
    assert json_of(console(lane, "task", "show", task.id, "--board", "other", "--json"))[
        "title"] == "same id"
    missing = console(lane, "task", "show", "t-00000000")
    assert missing.returncode == 2 and "no task 't-00000000' on any board" in missing.stderr


def test_top_level_help_is_written_for_people(lane: Lane) -> None:
    done = console(lane, "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "``" not in text and "Run coding tasks from a task board" in text
    assert "before or after the command" in text


def test_text_log_lines_carry_a_timestamp(lane: Lane) -> None:
    done = console(lane, "run", "--until-idle", "--log-format", "text")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines, "the daemon logged nothing at info"
    stamped = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 lane-runner: \w+: ")
    assert all(stamped.match(line) for line in lines), lines


@pytest.mark.parametrize(
    ("extra", "module", "board_url", "requirement"),
    [
        ("postgres", "psycopg", "postgresql://lanes@127.0.0.1:9/lanes", "'psycopg[binary]>=3.1'"),
        ("hermes", "hermes_cli", "hermes://", "'hermes-agent<0.20,>=0.19.0'"),
    ],
)
def test_a_missing_extra_names_an_install_that_works(
    lane: Lane, tmp_path: Path, extra: str, module: str, board_url: str, requirement: str
) -> None:
    """lane-runner is not on PyPI: the hint names the extra's own requirements, and the
    checkout's ``pip install '.[extra]'``, never ``lane-runner[extra]``."""
    missing = tmp_path / "missing"
    (missing / module).mkdir(parents=True)
    (missing / module / "__init__.py").write_text(
        f"raise ModuleNotFoundError({f'No module named {module!r}'!r}, name={module!r})\n"
    )
    lane.write_config(board_url=board_url)
    done = console(lane, "task", "ls", env={"PYTHONPATH": str(missing)})
    assert done.returncode == 1, done.stderr
    assert requirement in done.stderr and f"pip install '.[{extra}]'" in done.stderr
    assert "lane-runner[" not in done.stderr


def test_the_docs_name_no_install_that_fails() -> None:
    root = Path(__file__).parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    read = "".join(page.read_text() for page in pages)
    assert "lane-runner[" not in read
    assert "pip install '.[hermes]'" in read and "pip install '.[postgres]'" in read


def test_run_makes_the_home_it_is_given_and_a_dry_run_does_not(lane: Lane, tmp_path: Path) -> None:
    """``run`` is how a home starts (as ``board create`` is); a dry run only reads."""
    home = tmp_path / "new-home"
    looked = console(lane, "--home", str(home), "run", "--dry-run")
    assert looked.returncode == 2 and "no lane-runner home" in looked.stderr
    assert not home.exists()
    ran = console(lane, "--home", str(home), "run", "--until-idle",
                  env={"LANE_RUNNER_SIMULATE": "true"})
    assert ran.returncode == 0, ran.stderr
    assert home.is_dir()
