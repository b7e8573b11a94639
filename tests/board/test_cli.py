"""``lane-runner board|task`` end to end, in a subprocess, against a real home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import git

#: The console script installed beside the interpreter running the tests.
LANE_RUNNER = str(Path(sys.executable).with_name("lane-runner"))


class Cli:
    def __init__(self, home: Path, repo: Path) -> None:
        self.home = home
        #: ``task add`` in the workspace tasks are filed with (it needs one)
        self.add_task = ("task", "add", "--workspace", str(repo))

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("LANE_RUNNER_")}
        return subprocess.run(
            [LANE_RUNNER, "--home", str(self.home), *args],
            input=stdin, capture_output=True, text=True, env=environ, timeout=60,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        done = self(*args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def json(self, *args: str) -> object:
        return json.loads(self.ok(*args, "--json"))

    def refused(self, *args: str) -> str:
        """Exit 2 with one line that names the problem."""
        done = self(*args)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1
        return done.stderr


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    repo = tmp_path / "work"
    git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=repo)
    runner = Cli(tmp_path / "home", repo)
    runner.ok("board", "create", "main")
    return runner


def test_file_list_and_show(cli: Cli, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("do the thing\n")
    repo = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=repo)
    parent = cli.json(
        "task", "add", "--board", "main", "--title", "first", "--id", "a",
        "--body-file", str(body), "--assignee", "cli-codex-high", "--priority", "2",
        "--workspace", str(repo), "--max-runtime", "600", "--goal-turns", "3",
    )
    assert isinstance(parent, dict)
    assert {k: parent[k] for k in ("id", "board", "status", "assignee", "priority", "body")} == {
        "id": "a", "board": "main", "status": "ready", "assignee": "cli-codex-high",
        "priority": 2, "body": "do the thing\n",
    }
    assert parent["created_at"].endswith("Z") and parent["next_attempt_at"] is None
    assert (parent["workspace"], parent["max_runtime"], parent["goal_turns"]) == (
        str(repo), 600.0, 3,
    )
    assert cli.ok(*cli.add_task, "--board", "main", "--title", "second", "--parent", "a",
                  "--body-file", "-", stdin="from stdin").startswith("added main/t-")

    listing = cli.ok("task", "ls")
    lines = listing.splitlines()
    assert lines[0].split() == ["BOARD", "ID", "STATUS", "ASSIGNEE", "PROVIDER", "NODE", "PRIORITY",
                                "UPDATED", "TITLE", "BLOCKED", "BECAUSE"]
    assert lines[1].split()[:3] == ["main", "a", "ready"]
    assert lines[2].split()[2] == "todo"
    assert lines[1].index("ready") == lines[2].index("todo")  # aligned columns
    todo = cli.json("task", "ls", "--board", "main", "--status", "todo")
    assert isinstance(todo, list) and [t["parents"] for t in todo] == [["a"]]
    assert todo[0]["body"] == "from stdin"
    expected = {
        "id", "board", "title", "status", "assignee", "priority", "parents", "current_run_id",
        "completed_run_id", "next_attempt_at", "block_reason", "block_kind", "summary",
        "result", "created_at", "updated_at",
    }
    assert expected <= set(todo[0])

    assert cli.ok("task", "comment", "--board", "main", "a", "please hurry") == (
        "commented on main/a\n"
    )
    shown = cli.json("task", "show", "--board", "main", "a")
    assert isinstance(shown, dict)
    assert shown["runs"] == [] and [e["kind"] for e in shown["events"]] == ["created"]
    assert [c["body"] for c in shown["comments"]] == ["please hurry"]
    human = cli.ok("task", "show", "--board", "main", "a")
    for heading in ("runs:", "events:", "comments:", "result:", "please hurry", "do the thing"):
        assert heading in human


def test_board_ls(cli: Cli) -> None:
    cli.ok("board", "create", "second")
    cli.ok(*cli.add_task, "--board", "second", "--title", "t")
    boards = cli.json("board", "ls")
    assert boards == [
        {"board": "main", "available": True, "error": None,
         "counts": {"todo": 0, "ready": 0, "running": 0, "done": 0, "blocked": 0,
                    "archived": 0, "review": 0}},
        {"board": "second", "available": True, "error": None,
         "counts": {"todo": 0, "ready": 1, "running": 0, "done": 0, "blocked": 0,
                    "archived": 0, "review": 0}},
    ]
    assert cli.ok("board", "ls").splitlines()[2].split()[:3] == ["second", "0", "1"]


def test_corrupt_board_is_listed_as_unavailable(cli: Cli) -> None:
    cli.ok(*cli.add_task, "--board", "main", "--title", "t")
    (cli.home / "boards" / "broken.db").write_bytes(b"not sqlite" * 50)
    boards = cli.json("board", "ls")
    assert isinstance(boards, list)
    assert [(b["board"], b["available"]) for b in boards] == [("broken", False), ("main", True)]
    assert len(cli.json("task", "ls")) == 1  # type: ignore[arg-type]
    done = cli("task", "ls", "--board", "broken")
    assert done.returncode == 1 and "broken" in done.stderr


def test_unblock_and_archive(cli: Cli) -> None:
    cli.ok(*cli.add_task, "--board", "main", "--title", "t", "--id", "t")
    assert "not blocked" in cli.refused("task", "unblock", "--board", "main", "t")
    archived = cli.json("task", "archive", "--board", "main", "t")
    assert isinstance(archived, dict) and archived["status"] == "archived"
    assert cli.ok("task", "archive", "--board", "main", "t") == "archived main/t (now archived)\n"


def test_bad_input_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    cli.ok("board", "create", "other")
    cli.ok(*cli.add_task, "--board", "other", "--title", "elsewhere", "--id", "p")
    cli.ok(*cli.add_task, "--board", "main", "--title", "t", "--id", "t")
    before = cli.json("task", "ls")
    big = tmp_path / "big"
    big.write_bytes(b"x" * (256 * 1024 + 1))
    add = (*cli.add_task, "--board", "main", "--title", "x")
    cases = [
        ("invalid board", (*cli.add_task, "--board", "../etc", "--title", "x")),
        ("invalid task id", (*add, "--id", "a/b")),
        ("board create", (*cli.add_task, "--board", "nope", "--title", "x")),
        ("cycle", (*add, "--id", "loop", "--parent", "loop")),
        ("same board", (*add, "--parent", "p")),
        ("256 KiB", (*add, "--body-file", str(big))),
        ("invalid assignee", (*add, "--assignee", "cli-gpt-high")),
        ("already exists", (*add, "--id", "t")),
        ("--goal-turns", (*add, "--goal-turns", "0")),
        ("no task", ("task", "show", "--board", "main", "nope")),
        ("no board", ("task", "show", "--board", "nope", "t")),
        ("invalid board 'a b'", ("board", "create", "a b")),
        ("already exists", ("board", "create", "main")),
        ("--body", (*add, "--body", "b", "--body-file", str(big))),
    ]
    for words, args in cases:
        assert words in cli.refused(*args), words
    assert cli.json("task", "ls") == before
    assert sorted(p.name for p in (cli.home / "boards").glob("*.db")) == ["main.db", "other.db"]


def test_a_home_first_made_by_board_create_is_private(tmp_path: Path) -> None:
    """Like every other home (``Home.ensure``), whatever the umask says."""
    home = tmp_path / "fresh" / "home"
    previous = os.umask(0o022)
    try:
        Cli(home, tmp_path).ok("board", "create", "main")
    finally:
        os.umask(previous)
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in (home, home / "boards")} == {
        "home": "0o700", "boards": "0o700"
    }
