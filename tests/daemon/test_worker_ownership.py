"""Under a pool of worker users (``run/ownership.py``), code running as one pool user
(a task's code) attacks what another pool user's task keeps beside its worktree: the
board's folder, the result file's outbox and the worktree itself (issue 47, case 2).
Each test runs the attack as the other user, through ``runuser``."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest

from lane_runner.run import ownership, workspace

POOL = tuple(filter(None, os.environ.get("LANE_POOL_USERS", "").split(",")))
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or len(POOL) < 2, reason="needs root and LANE_POOL_USERS (.ci/run)"
)


def as_user(user: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", user, "--", "sh", "-c", script],
                          capture_output=True, text=True, check=False)


def owner(path: Path) -> str:
    return pwd.getpwuid(os.stat(path, follow_symlinks=False).st_uid).pw_name


def test_the_board_folder_lets_no_pool_user_rename_list_or_remove_anothers(
    shared_dir: Path,
) -> None:
    # caught: the folder left the last worker's (0700) or made 0777 without the sticky bit
    victim, attacker = POOL[:2]
    folder = shared_dir / "worktrees" / "b"
    ownership.board_folder(folder)
    (shared_dir / "worktrees").chmod(0o711)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o1733 and owner(folder) == "root"
    assert as_user(victim, f"mkdir {folder}/t1 && echo real > {folder}/t1/answer").returncode == 0
    attack = as_user(attacker, f"ls {folder}; mv {folder}/t1 {folder}/gone; "
                               f"rm -rf {folder}/t1; mkdir {folder}/forged && mv -fT "
                               f"{folder}/forged {folder}/t1")
    assert "t1" not in attack.stdout  # not listed
    assert (folder / "t1" / "answer").read_text() == "real\n"
    assert owner(folder / "t1") == victim
    assert as_user(attacker, f"mkdir {folder}/t2").returncode == 0  # its own entries: yes


def test_a_neighbours_outbox_planted_first_is_moved_aside_unread(shared_dir: Path) -> None:
    # caught: outbox() keeping a directory another user made (its forged answer read)
    victim, attacker = POOL[:2]
    folder = shared_dir / "b"
    ownership.board_folder(folder)
    box = folder / ".t1.out"
    planted = as_user(attacker, f"mkdir -m 777 {box} && echo FORGED > {box}/result.json "
                                f"&& chmod 666 {box}/result.json")
    assert planted.returncode == 0, planted.stderr
    ownership.outbox(box, victim)
    assert owner(box) == victim and stat.S_IMODE(box.stat().st_mode) == 0o700
    assert not (box / "result.json").exists()
    attack = as_user(attacker, f"echo FORGED > {box}/result.json; ls {box}")
    assert attack.returncode != 0 and not (box / "result.json").exists()
    link = folder / ".t2.out"
    assert as_user(attacker, f"ln -s /etc {link}").returncode == 0
    ownership.outbox(link, victim)  # a link there: moved aside, never followed
    assert not link.is_symlink() and owner(link) == victim and owner(Path("/etc")) == "root"


def test_the_outbox_goes_with_its_worktree_and_no_link_in_it_is_followed(
    shared_dir: Path,
) -> None:
    # caught: the outbox left behind once the worktree is removed (one per task, for
    # ever), or its removal following a link the task's code planted in it
    victim = POOL[0]
    folder = shared_dir / "b"
    ownership.board_folder(folder)
    kept = shared_dir / "kept"
    kept.mkdir()
    (kept / "roots-file").write_text("root's\n")
    worktree = folder / "t1"
    box = ownership.outbox_of(worktree)
    ownership.outbox(box, victim)
    planted = as_user(victim, f"echo late > {box}/answer.json && ln -s {kept} {box}/dir "
                              f"&& ln -s {kept}/roots-file {box}/file")
    assert planted.returncode == 0, planted.stderr
    assert workspace.remove(worktree, victim) is None  # the worktree already gone
    assert not os.path.lexists(box)
    assert (kept / "roots-file").read_text() == "root's\n"
    link = ownership.outbox_of(folder / "t2")
    link.symlink_to(kept)
    assert workspace.remove(folder / "t2", victim) is None
    assert not os.path.lexists(link) and (kept / "roots-file").exists()


def test_a_hand_over_never_follows_a_link_out_of_the_tree(shared_dir: Path) -> None:
    # caught: chown following links (the planted link's target, root's, given away)
    first, second = (pwd.getpwnam(user) for user in POOL[:2])
    tree = shared_dir / "wt"
    outside = shared_dir / "roots-file"
    outside.write_text("root's\n")
    tree.mkdir()
    os.chown(tree, first.pw_uid, first.pw_gid)
    made = as_user(first.pw_name, f"mkdir -p {tree}/src/deep && echo x > {tree}/src/deep/f "
                                  f"&& ln -s {outside} {tree}/src/link && ln -s {shared_dir} "
                                  f"{tree}/dirlink")
    assert made.returncode == 0, made.stderr
    ownership.hand_over(tree, second.pw_name)
    for path in (tree, tree / "src", tree / "src" / "deep", tree / "src" / "deep" / "f",
                 tree / "src" / "link", tree / "dirlink"):
        assert owner(path) == second.pw_name, path
    assert owner(outside) == "root" and owner(shared_dir) == "root"
    assert stat.S_IMODE(tree.stat().st_mode) == 0o700
    assert as_user(first.pw_name, f"ls {tree}").returncode != 0  # no longer its to read


def test_a_retry_as_another_pool_user_works_in_the_worktree_it_is_handed(
    shared_dir: Path,
) -> None:
    """A task's first run as one pool user, its retry as the other: the retry finds the
    worktree its own (0700), the first user is locked out of it, and the board's folder
    stays root's. Caught: prepare without the hand-over (git refuses the worktree as
    'dubious ownership' and the retry cannot write a file)."""
    first, second = POOL[:2]
    repo = shared_dir / "repo"
    repo.mkdir()
    os.chown(repo, pwd.getpwnam(first).pw_uid, -1)
    made = as_user(first, f"git init -q -b main {repo} && git -C {repo} -c user.name=t "
                          "-c user.email=t@t commit -q --allow-empty -m i")
    assert made.returncode == 0, made.stderr
    home = shared_dir / "home"
    home.mkdir(mode=0o711)
    worktree = home / "worktrees" / "b" / "t1"
    made_first = workspace.prepare(str(repo), worktree, "lane/b/t1", first, run=1, pooled=True)
    assert owner(made_first.path) == first
    assert stat.S_IMODE(worktree.stat().st_mode) == 0o700
    assert stat.S_IMODE(worktree.parent.stat().st_mode) == 0o1733
    again = workspace.prepare(str(repo), worktree, "lane/b/t1", second, run=2, pooled=True)
    assert again.path == worktree and owner(worktree) == second
    assert as_user(second, f"echo work > {worktree}/edit.txt").returncode == 0
    assert as_user(first, f"echo spoiled > {worktree}/edit.txt").returncode != 0
    assert (worktree / "edit.txt").read_text() == "work\n"


def test_a_worktree_name_squatted_before_the_tasks_first_run_is_moved_aside(
    shared_dir: Path,
) -> None:
    """A pool user plants a clone with a hook at a task's predictable worktree name
    before the task's first run: the run moves it aside unread and clones afresh, as its
    own user. Caught: handing a fresh task's squatted entry over (the planted clone, its
    hook, became the task's worktree)."""
    victim, attacker = POOL[:2]
    repo = shared_dir / "repo"
    repo.mkdir()
    os.chown(repo, pwd.getpwnam(victim).pw_uid, -1)
    made = as_user(victim, f"git init -q -b main {repo} && git -C {repo} -c user.name=t "
                           "-c user.email=t@t commit -q --allow-empty -m i")
    assert made.returncode == 0, made.stderr
    home = shared_dir / "home"
    home.mkdir(mode=0o711)
    worktree = home / "worktrees" / "b" / "t1"
    ownership.board_folder(worktree.parent)
    planted = as_user(attacker, f"git init -q -b lane/b/t1 {worktree} && git -C {worktree} "
                                "-c user.name=a -c user.email=a@a commit -q --allow-empty -m x "
                                f"&& echo 'echo PWNED' > {worktree}/.git/hooks/pre-commit "
                                f"&& chmod +x {worktree}/.git/hooks/pre-commit")
    assert planted.returncode == 0, planted.stderr
    made_fresh = workspace.prepare(str(repo), worktree, "lane/b/t1", victim, run=1,
                                   pooled=True, fresh=True)
    assert made_fresh.path == worktree and owner(worktree) == victim
    assert not (worktree / ".git" / "hooks" / "pre-commit").exists()
    aside = [p.name for p in worktree.parent.iterdir() if ".aside-unclaimed-" in p.name]
    assert len(aside) == 1 and owner(worktree.parent / aside[0]) == attacker
