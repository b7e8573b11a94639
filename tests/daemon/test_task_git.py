"""One task, one git directory (issue 47, ``run/taskgit.py``): attacks from inside a task.

A task's code plants what it can in its git directory (a hook, a filter, configuration)
and moves the branch of the task that comes after it; that task then commits with git
itself, as an agent does, and must be done on its own branch, from the repository's
HEAD, its own commit delivered, nothing planted run. On the runner before per-task git
directories (one linked worktree per task, the repository's git directory shared) the
victim's ``git commit`` runs the planted hook and its branch starts on the attacker's
commit. The same attack by real agents under ``user`` and ``sandbox``:
``tests/realrun/test_sandbox.py``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lane_runner.board.model import Status
from lane_runner.run import taskgit, workspace
from tests.harness import BOARD, Lane

#: Run as every task's ``before_run`` hook (the task's own code, in its worktree).
ATTACKER = """
git -c user.email=a@e -c user.name=a commit -q --allow-empty -m "the attacker's"
git update-ref refs/heads/{victim_branch} HEAD
common="$(git rev-parse --path-format=absolute --git-common-dir)"
mkdir -p "$common/hooks" "$common/info"
printf '#!/bin/sh\\ntouch {marker}\\n' > "$common/hooks/post-commit"
chmod +x "$common/hooks/post-commit"
echo '* filter=evil' >> "$common/info/attributes"
git config filter.evil.clean "sh -c 'touch {marker}; echo FORGED'"
git config user.name attacker
"""
VICTIM = """
echo mine > mine.txt
git add mine.txt
git -c user.email=v@e -c user.name=victim commit -q -m "the victim's own"
"""
SCRIPT = """
if [ "$LANE_TASK_TITLE" = attacker ]; then {attacker}
else {victim}
fi
"""

def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True,
                          text=True).stdout


def test_what_one_task_plants_in_its_git_directory_reaches_no_other_task(lane: Lane) -> None:
    """Under ``isolation = none`` (the simulators run as they are, hooks too: the sandbox
    and ``user`` levels are ``tests/realrun/test_sandbox.py``'s, with real agents).
    Catches: tasks sharing the repository's git directory (linked worktrees: the
    victim's ``git commit`` runs the planted hook and filter, and its branch starts on
    the attacker's commit)."""
    marker = lane.root / "planted.ran"
    attacker = lane.add("attacker")
    victim = lane.add("victim")
    victim_branch = workspace.branch_name(BOARD, victim.id)
    script = SCRIPT.format(
        attacker=ATTACKER.format(marker=marker, victim_branch=victim_branch),
        victim=VICTIM,
    )
    lane.write_config(isolation="none", concurrency=1, hooks={"*": {"before_run": script}})
    assert lane.start("--until-idle").wait(timeout=180) == 0
    for task in (attacker, victim):
        done = lane.board.get_task(task.id)
        assert done.status is Status.DONE, done.block_reason
    assert not marker.exists(), "the victim's git ran what the attacker planted"
    main = git("rev-parse", "refs/heads/main", cwd=lane.repo).strip()
    [event] = [e for e in lane.board.events(victim.id) if e.kind == "completed"]
    delivered = event.data["metadata"]["delivery"]
    assert delivered["base"] == main, "the victim's branch did not start at the repository's HEAD"
    assert git("rev-parse", f"refs/heads/{victim_branch}", cwd=lane.repo).strip() == \
        delivered["head"]
    log = git("log", "--format=%s", f"{main}..{delivered['head']}", cwd=lane.repo)
    assert "the victim's own" in log and "the attacker's" not in log
    assert git("show", f"{delivered['head']}:mine.txt", cwd=lane.repo) == "mine\n"
    assert not (lane.repo / ".git" / "hooks" / "post-commit").exists()


def test_the_agents_own_commits_reach_the_repository_with_the_result(lane: Lane) -> None:
    """The task commits by itself (as an agent in its sandbox can now); the runner's result
    commit comes after it, and both are on the task's branch of the repository.
    Catches: the result left in the clone alone (no ``publish``)."""
    lane.write_config(hooks={"*": {"before_run": VICTIM}})
    task = lane.add("commits by itself")
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert lane.board.get_task(task.id).status is Status.DONE
    branch = workspace.branch_name(BOARD, task.id)
    subjects = git("log", "--format=%s", "-2", branch, cwd=lane.repo).splitlines()
    assert subjects[1] == "the victim's own" and subjects[0] != subjects[1]


# -- the registry and the publication ---------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty",
        "-m", "init", cwd=path)
    return path


def commit(worktree: Path, message: str) -> str:
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty",
        "-m", message, cwd=worktree)
    return git("rev-parse", "HEAD", cwd=worktree).strip()


def test_a_clone_whose_alternates_name_another_repository_is_not_published_into_it(
    repo: Path, tmp_path: Path
) -> None:
    """The task rewrites its ``objects/info/alternates`` to name another repository the
    worker can write: the runner neither publishes there nor takes it for the task's.
    Catches: ``repository_of`` trusting the alternates without the registry's word."""
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", "-b", "main", cwd=other)
    clone = tmp_path / "wt" / "t1"
    workspace.prepare(str(repo), clone, "lane/b/t1")
    assert taskgit.repository_of(clone) == (repo / ".git").resolve()
    head = commit(clone, "work")
    alternates = clone / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(f"{other / '.git' / 'objects'}\n{repo / '.git' / 'objects'}\n")
    assert taskgit.repository_of(clone) is None
    with pytest.raises(taskgit.PublishError, match="no longer names the repository"):
        taskgit.publish(clone, "lane/b/t1", head, None)
    assert git("for-each-ref", cwd=other) == ""


def test_what_is_published_is_the_commit_named_not_where_the_task_moved_its_branch(
    repo: Path, tmp_path: Path
) -> None:
    """Catches: fetching the clone's branch by name (the task moves it between the
    runner's commit and the publication)."""
    clone = tmp_path / "wt" / "t1"
    workspace.prepare(str(repo), clone, "lane/b/t1")
    result = commit(clone, "the result")
    commit(clone, "moved on afterwards")
    taskgit.publish(clone, "lane/b/t1", result, None)
    assert git("rev-parse", "refs/heads/lane/b/t1", cwd=repo).strip() == result


def test_a_worktree_half_made_by_another_git_does_not_fail_the_publication(
    repo: Path, tmp_path: Path
) -> None:
    """``git worktree add`` (Hermes's dispatcher's, anyone's) writes the new worktree's
    HEAD as the null id before pointing it at its branch; a fetch in between says "bad
    object worktrees/<name>/HEAD". The runner's publication fetches again. Catches:
    fetching once (the CI failure of a Hermes ``worktree`` task made while a ``dir:``
    task of the same repository published its result: blocked ``capability``)."""
    clone = tmp_path / "wt" / "t1"
    workspace.prepare(str(repo), clone, "lane/b/t1")
    result = commit(clone, "the result")
    common = Path(git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=repo)
                  .strip())
    half = common / "worktrees" / "half"
    half.mkdir(parents=True)
    (half / "commondir").write_text("../..\n")
    (half / "gitdir").write_text(f"{tmp_path / 'half' / '.git'}\n")
    (half / "HEAD").write_text("0" * 40 + "\n")  # what git worktree add writes first

    def finish() -> None:  # and, a moment later, what it writes next
        time.sleep(0.25)
        (half / "HEAD").write_text("ref: refs/heads/main\n")

    finishing = threading.Thread(target=finish)
    finishing.start()
    try:
        taskgit.publish(clone, "lane/b/t1", result, None)
    finally:
        finishing.join()
    assert git("rev-parse", "refs/heads/lane/b/t1", cwd=repo).strip() == result


def test_a_linked_worktree_an_older_runner_left_is_used_and_removed_as_it_is(
    repo: Path, tmp_path: Path
) -> None:
    """A worktree made by ``git worktree add`` (the runner before per-task git
    directories) at the task's path is reused, its commits are the repository's already
    (``publish`` does nothing), and it is removed through git. Catches: a linked
    worktree taken for a clone (removed by deleting the directory: git keeps its record
    and the branch stays checked out there)."""
    target = tmp_path / "wt" / "t1"
    target.parent.mkdir()
    git("worktree", "add", "-q", "-b", "lane/b/t1", str(target), cwd=repo)
    prepared = workspace.prepare(str(repo), target, "lane/b/t1")
    assert (prepared.path, prepared.created, prepared.branch) == (target, False, "lane/b/t1")
    assert not taskgit.is_clone(target)
    head = commit(target, "work")
    taskgit.publish(target, "lane/b/t1", head, None)
    assert git("rev-parse", "refs/heads/lane/b/t1", cwd=repo).strip() == head
    assert workspace.remove(target, force=True) is None
    assert str(target) not in git("worktree", "list", cwd=repo)


def test_a_dead_runners_clone_is_taken_over_with_its_unpublished_commits(
    repo: Path, tmp_path: Path
) -> None:
    """Another home finds the clone through the repository's registry and moves it, its
    commits the repository never got with it. Catches: a registry entry not written
    (the clone is not found: the task starts over at the repository's branch)."""
    dead = tmp_path / "home1" / "wt" / "t"
    workspace.prepare(str(repo), dead, "lane/b/t", run=1)
    unpublished = commit(dead, "only in the dead runner's clone")
    mine = tmp_path / "home2" / "wt" / "t"
    prepared = workspace.prepare(str(repo), mine, "lane/b/t", run=2,
                                 is_current=lambda run: False)
    assert prepared.taken_over_from == dead and not dead.exists()
    assert git("rev-parse", "HEAD", cwd=mine).strip() == unpublished
    assert [entry.worktree for entry in taskgit.entries(repo / ".git")] == [mine.absolute()]
    assert os.path.isdir(mine / ".git")


def test_a_runner_killed_at_any_moment_of_a_clone_leaves_a_whole_one_next_time(
    repo: Path, tmp_path: Path
) -> None:
    """``workspace.prepare`` in a child process, SIGKILLed (with its git) after a random
    moment, then prepared again at once: the clone is whole (every file, a clean status,
    on its branch, registered). Catches: the clone made at its place rather than in a
    staging directory renamed there (a worktree missing files, committed as deletions),
    and a staging directory a kill left not removed (every later clone refused)."""
    for index in range(120):
        (repo / f"f{index}").write_text("x" * 2000)
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "files", cwd=repo)
    chance = random.Random(47)
    code = ("import sys; from pathlib import Path; from lane_runner.run import workspace; "
            "print(flush=True); workspace.prepare(sys.argv[1], Path(sys.argv[2]), sys.argv[3])")
    scratch = tmp_path / "tmp"  # the checkout's shadow git directory a kill leaves
    scratch.mkdir()
    for n in range(30):
        target, branch = tmp_path / "wt" / f"k{n}", f"lane/b/k{n}"
        child = subprocess.Popen([sys.executable, "-c", code, str(repo), str(target), branch],
                                 start_new_session=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL,
                                 env={**os.environ, "TMPDIR": str(scratch)})
        assert child.stdout is not None
        child.stdout.readline()  # imported: the kill lands in prepare's git calls
        time.sleep(chance.uniform(0, 0.25))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        prepared = workspace.prepare(str(repo), target, branch)
        assert git("branch", "--show-current", cwd=prepared.path).strip() == branch
        assert (prepared.path / "f119").exists()
        assert git("status", "--porcelain", cwd=prepared.path) == ""
        assert taskgit.repository_of(prepared.path) == (repo / ".git").resolve()
    assert not list((tmp_path / "wt").glob(".*.cloning"))


def test_finding_a_branchs_clone_reads_only_the_entries_named_for_it(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository keeps an entry per clone of its tasks, for as long as their worktrees
    are kept: a new task's workspace reads the entries of its branch and the clone's own,
    not all of them (issue 46). Catches: ``entries`` or ``repository_of`` reading every
    entry again (the count grows with the clones)."""
    kept = [tmp_path / "wt" / f"t{index}" for index in range(12)]
    for index, path in enumerate(kept):
        workspace.prepare(str(repo), path, f"lane/b/t{index}")
    reads: list[Path] = []
    read = taskgit.files.read_workers

    def counted(path: Path, limit: int) -> bytes:
        reads.append(path)
        return read(path, limit)

    monkeypatch.setattr(taskgit.files, "read_workers", counted)
    new = tmp_path / "wt" / "new"
    workspace.prepare(str(repo), new, "lane/b/new")
    assert taskgit.repository_of(new) == (repo / ".git").resolve()
    registry = [path for path in reads if path.parent.name == taskgit.REGISTRY]
    assert len(registry) <= 1, registry


def test_an_entry_an_older_runner_wrote_is_still_found_and_forgotten(
    repo: Path, tmp_path: Path
) -> None:
    """Entries were named by the clone alone before their names said the branch: a dead
    older runner's clone is still taken over, and the entry goes with the move. Catches:
    the older names skipped (the clone is not found: the task starts over) or left behind."""
    dead = tmp_path / "home1" / "wt" / "t"
    workspace.prepare(str(repo), dead, "lane/b/t", run=1)
    unpublished = commit(dead, "only in the dead runner's clone")
    registry = repo / ".git" / taskgit.REGISTRY
    (entry,) = os.listdir(registry)
    os.rename(registry / entry, registry / entry.partition("-")[0])  # as an older runner named it
    assert taskgit.repository_of(dead) == (repo / ".git").resolve()
    mine = tmp_path / "home2" / "wt" / "t"
    prepared = workspace.prepare(str(repo), mine, "lane/b/t", run=2,
                                 is_current=lambda run: False)
    assert prepared.taken_over_from == dead
    assert git("rev-parse", "HEAD", cwd=mine).strip() == unpublished
    assert [entry.worktree for entry in taskgit.entries(repo / ".git")] == [mine.absolute()]
    assert len(os.listdir(registry)) == 1
