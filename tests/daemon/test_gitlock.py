"""A killed git's lock files do not stop the result's commit; a live git's do (the crash
campaign's find: an accepted result blocked on a stale ``index.lock``).

Real repositories, real worktrees, a real process holding a lock open."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from lane_runner.run import delivery, gitlock
from tests.harness import git

BRANCH = "lane/main/t-1"
AUTHOR = delivery.Author("lane-runner", "lane-runner@localhost")


def worktree(tmp_path: Path) -> tuple[Path, Path]:
    """A repository and a worktree of it on ``BRANCH``."""
    repo = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
    tree = tmp_path / "t-1"
    git("worktree", "add", "-q", "-b", BRANCH, str(tree), cwd=repo)
    return repo, tree


def locks(repo: Path) -> tuple[Path, Path]:
    git_dir = repo / ".git"
    ref = git_dir / "refs" / "heads" / f"{BRANCH}.lock"
    return git_dir / "worktrees" / "t-1" / "index.lock", ref


def test_locks_no_process_holds_are_taken_away_and_the_result_commits(tmp_path: Path) -> None:
    repo, tree = worktree(tmp_path)
    for lock in locks(repo):
        lock.write_text("")  # what a git killed between creating and renaming it leaves
    (tree / "work.txt").write_text("done\n")
    with pytest.raises(delivery.DeliveryError, match="index.lock"):
        delivery.commit(tree, "result", AUTHOR, None)
    assert sorted(gitlock.clear_stale(tree, BRANCH)) == sorted(locks(repo))
    assert delivery.commit(tree, "result", AUTHOR, None)
    assert gitlock.clear_stale(tree, BRANCH) == []


def test_a_lock_a_live_process_holds_stays(tmp_path: Path) -> None:
    repo, tree = worktree(tmp_path)
    index_lock, ref_lock = locks(repo)
    holder = subprocess.Popen(["sh", "-c", f"exec 3>>'{index_lock}'; echo held; exec sleep 60"],
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        ref_lock.write_text("")
        assert gitlock.clear_stale(tree, BRANCH) == [ref_lock]
        assert index_lock.exists()
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10
    while gitlock.held(index_lock, index_lock.stat().st_uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gitlock.clear_stale(tree, BRANCH) == [index_lock]


def test_a_worktree_whose_git_points_elsewhere_has_its_locks_left_alone(
    tmp_path: Path,
) -> None:
    """A worker may rewrite its worktree's ``.git`` file: locks are only ever taken away
    inside the repository the worktree's git directory belongs to."""
    _, tree = worktree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    git("init", "-q", str(elsewhere), cwd=tmp_path)
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "index.lock").write_text("")
    (planted / "HEAD").write_text("ref: refs/heads/main\n")
    (planted / "commondir").write_text(str(elsewhere / ".git") + "\n")
    (tree / ".git").write_text(f"gitdir: {planted}\n")
    assert gitlock.clear_stale(tree, BRANCH) == []
    assert (planted / "index.lock").exists()
