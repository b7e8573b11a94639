"""The refs the task's branch is chosen by, looked up in one git call (issue 46)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lane_runner.run import refs, workspace


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout


def repository(path: Path) -> Path:
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("x\n")
    git("add", ".", cwd=path)
    git("commit", "-qm", "one", cwd=path)
    return path


def test_a_missing_or_ambiguous_name_is_left_out_and_a_short_answer_too() -> None:
    """Caught: reading ``missing`` as a type (every branch would look taken)."""
    names = ["refs/heads/a", "refs/heads/b", "HEAD", "refs/heads/c"]
    output = "1111 commit\nrefs/heads/b missing\n2222 commit\n"
    assert refs.parse(names, output) == {
        "refs/heads/a": refs.Found("1111", "commit"), "HEAD": refs.Found("2222", "commit"),
    }
    assert refs.parse(["x"], "x ambiguous\n") == {}


def test_look_up_answers_as_rev_parse_verify_would(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    git("branch", "lane/b/t1", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo).strip()
    found = refs.look_up(repo, ["refs/heads/lane/b/t1", "refs/heads/lane", "HEAD"], None)
    assert found == {"refs/heads/lane/b/t1": refs.Found(head, "commit"),
                     "HEAD": refs.Found(head, "commit")}
    assert refs.look_up(tmp_path, ["HEAD"], None) == {}  # no repository: nothing


def test_a_branch_below_the_tasks_name_leaves_the_task_its_twin(tmp_path: Path) -> None:
    """git cannot have lane/b/t1 beside lane/b/t1/x. Caught: dropping the look below."""
    repo = repository(tmp_path / "repo")
    git("branch", "lane/b/t1/x", cwd=repo)
    made = workspace.prepare(str(repo), tmp_path / "wt" / "t1", "lane/b/t1")
    assert made.branch == "lane-b-t1"


def test_a_new_worktree_starts_at_its_branch_and_says_at_which_commit(tmp_path: Path) -> None:
    """The run's base comes from ``Workspace.head`` without asking git again. Caught:
    starting from HEAD before the branch (the head would be the repository's HEAD)."""
    repo = repository(tmp_path / "repo")
    git("branch", "lane/b/t1", cwd=repo)
    older = git("rev-parse", "HEAD", cwd=repo).strip()
    git("commit", "-q", "--allow-empty", "-m", "two", cwd=repo)
    target = tmp_path / "wt" / "t1"
    made = workspace.prepare(str(repo), target, "lane/b/t1")
    assert made.created and made.head == older
    assert git("rev-parse", "HEAD", cwd=target).strip() == older
    fresh = workspace.prepare(str(repo), tmp_path / "wt" / "t2", "lane/b/t2")
    assert fresh.head == git("rev-parse", "HEAD", cwd=repo).strip()
