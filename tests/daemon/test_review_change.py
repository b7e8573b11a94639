"""What the reviewer is shown of a change (``run/review.change_since``): the diff stat and
the patch, from one ``git diff-tree`` call, exactly as the two separate calls print them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from lane_runner.run import delivery, review, snapshot
from lane_runner.run import git as runner_git


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
        cwd=cwd, capture_output=True, check=True, text=True,
    ).stdout


def test_the_stat_and_the_patch_are_those_git_prints_for_each(tmp_path: Path) -> None:
    """An edit, a new file, a rename, a mode change, a binary file, a file whose text holds
    a line like a patch's header and one named like it (caught: splitting on "diff --git"
    anywhere, or the patch left beginning with the stat's blank line)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "kept.txt").write_text("one\ntwo\n")
    (repo / "moved.txt").write_text("a file long enough to be found renamed\n" * 4)
    (repo / "run.sh").write_text("echo hi\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    base = git("rev-parse", "HEAD", cwd=repo).strip()
    unchanged = review.change_since(repo, base, None)
    assert (unchanged.stat, unchanged.diff) == ("", "")
    (repo / "kept.txt").write_text("one\ntwo\ndiff --git a/x b/x\n")
    (repo / "moved.txt").rename(repo / "renamed.txt")
    (repo / "run.sh").chmod(0o755)
    (repo / "blob.bin").write_bytes(bytes(range(256)))
    (repo / "new.txt").write_text("new\n")
    (repo / "diff --git odd").write_text("a name the stat shows\n")
    change = review.change_since(repo, base, None)
    stat, patch = change.stat, change.diff
    _, tree = snapshot.stage(repo, None)
    diff = ("diff-tree", "-r", "-M", "--no-ext-diff", "--no-textconv", base, tree)
    assert stat == git(*diff[:4], "--stat=100", *diff[4:], cwd=repo).rstrip()
    assert patch == git(*diff[:4], "-p", *diff[4:], cwd=repo)
    assert "renamed.txt" in stat and patch.startswith("diff --git ")


def reviewed_repository(tmp_path: Path) -> tuple[Path, snapshot.Staged]:
    """A repository with a change the reviewer was shown, and the staging it came from."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "kept.txt").write_text("one\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    base = git("rev-parse", "HEAD", cwd=repo).strip()
    (repo / "kept.txt").write_text("two\n")
    (repo / "new.txt").write_text("new\n")
    staged = review.change_since(repo, base, None).staged
    assert staged is not None
    return repo, staged


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The subcommands of every git call the runner makes from now on (they still run)."""
    calls: list[str] = []
    real = runner_git.run

    def counting(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(runner_git, "run", counting)
    return calls


AUTHOR = delivery.Author("lane-runner", "runner@localhost")


def test_the_commit_reuses_the_reviewers_tree_while_the_worktree_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed and hashed again, found the same: no index update, tree written or checked
    again, no top folder asked (caught: the staging ``known`` ignored: four more calls)."""
    repo, staged = reviewed_repository(tmp_path)
    calls = counted(monkeypatch)
    made = delivery.commit(repo, "result", AUTHOR, None, staged)
    assert made is not None
    assert git("rev-parse", f"{made}^{{tree}}", cwd=repo).strip() == staged.tree
    # its place (folders and HEAD) read, listed, hashed, committed, the branch moved, the
    # commit checked
    assert calls == ["rev-parse", "ls-files", "hash-object", "commit-tree", "update-ref",
                     "rev-parse"]
    assert git("status", "--porcelain", cwd=repo) == ""  # the index holds the commit's tree


@pytest.mark.parametrize("after_review", ["edit", "add", "index"])
def test_a_worktree_changed_since_the_review_is_staged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_review: str
) -> None:
    """A file rewritten to the same size, a file added, or the index changed after the
    reviewer's staging: the commit holds what the worktree holds now (caught: ``holds``
    comparing the paths only, or not the index)."""
    repo, staged = reviewed_repository(tmp_path)
    if after_review == "edit":
        (repo / "kept.txt").write_text("six\n")
    elif after_review == "add":
        (repo / "later.txt").write_text("later\n")
    else:
        git("rm", "-q", "--cached", "new.txt", cwd=repo)
    calls = counted(monkeypatch)
    made = delivery.commit(repo, "result", AUTHOR, None, staged)
    assert made is not None and "write-tree" in calls
    listed = git("ls-tree", "-r", "--name-only", made, cwd=repo).split()
    added = ["later.txt"] if after_review == "add" else []
    assert listed == sorted(["kept.txt", "new.txt", *added])
    kept = "six\n" if after_review == "edit" else "two\n"
    assert git("show", f"{made}:kept.txt", cwd=repo) == kept
    assert git("status", "--porcelain", cwd=repo) == ""
