"""Per-task git worktrees on real repositories."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lane_runner.run import checkout, handoff, interrupted, taskgit, workspace
from lane_runner.run import git as git_module


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("hello\n")
    git("add", ".", cwd=path)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "init", cwd=path)
    return path


def test_a_worktree_is_created_on_the_lane_branch_and_reused(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "wt" / "b" / "t1"
    assert workspace.prepare(str(repo), target, "lane/b/t1").path == target
    assert git("branch", "--show-current", cwd=target).strip() == "lane/b/t1"
    (target / "work.txt").write_text("in progress\n")
    assert workspace.prepare(str(repo), target, "lane/b/t1").path == target
    assert (target / "work.txt").exists()


def test_a_removed_worktree_comes_back_on_its_existing_branch(repo: Path, tmp_path: Path) -> None:
    """What the runner published on the repository's branch (``taskgit.publish``) is where
    a task's clone made again starts."""
    target = tmp_path / "wt" / "t1"
    workspace.prepare(str(repo), target, "lane/b/t1")
    (target / "f").write_text("x")
    git("add", "f", cwd=target)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "work", cwd=target)
    taskgit.publish(target, "lane/b/t1", git("rev-parse", "HEAD", cwd=target).strip(), None)
    subprocess.run(["rm", "-rf", str(target)], check=True)
    workspace.prepare(str(repo), target, "lane/b/t1")
    assert (target / "f").read_text() == "x"


def test_a_worktree_a_killed_git_left_half_made_is_made_afresh(repo: Path, tmp_path: Path) -> None:
    """``git worktree add`` writes the null id as the new worktree's HEAD before it checks
    the branch out, and keeps the worktree locked ("initializing") until it is done; a
    runner killed in between (seen in the pod test's kill -9) left a worktree that was
    reused and in which the accepted result could not be committed, and, locked, one
    that a plain forced remove refused (the task blocked)."""
    target = tmp_path / "wt" / "t2"
    git("worktree", "add", "-q", "-b", "lane/b/t2", str(target), cwd=repo)
    admin = Path(git("rev-parse", "--absolute-git-dir", cwd=target).strip())
    (admin / "HEAD").write_text("0" * 40 + "\n")
    (admin / "locked").write_text("initializing\n")
    (target / "README").unlink()  # the checkout had not happened yet
    prepared = workspace.prepare(str(repo), target, "lane/b/t2")
    assert prepared.path == target and prepared.created
    assert git("branch", "--show-current", cwd=target).strip() == "lane/b/t2"
    assert (target / "README").read_text() == "hello\n"
    (target / "work.txt").write_text("done\n")
    git("add", ".", cwd=target)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "result", cwd=target)


def _aged(*paths: Path) -> None:
    """Back-date what a killed git left past ``interrupted.STALE_AFTER``."""
    old = time.time() - 3600
    for path in paths:
        for each in [path, *(path.rglob("*") if path.is_dir() else [])]:
            os.utime(each, (old, old))


def test_what_a_killed_git_worktree_add_leaves_is_cleared_once_it_is_old(
    repo: Path, tmp_path: Path
) -> None:
    """The three leftovers seen when ``git worktree add`` is killed at random moments (the
    pod test's kill -9 met the second): another task's record without ``commondir``,
    which made every later add of the repository fail; this task's directory holding
    only its ``.git`` file; the lock of this task's new branch."""
    records = repo / ".git" / "worktrees"
    other = records / "t-other"
    other.mkdir(parents=True)
    (other / "locked").write_text("initializing")
    (other / "gitdir").write_text(str(tmp_path / "wt" / "t-other" / ".git"))
    (other / "commondir").write_text("")  # killed while writing it
    target = tmp_path / "wt" / "t3"
    target.mkdir(parents=True)
    (target / ".git").write_text(f"gitdir: {records / 't3'}\n")
    lock = repo / ".git" / "refs" / "heads" / "lane" / "b" / "t3.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    with pytest.raises(workspace.WorkspaceBusy, match="moments ago"):
        workspace.prepare(str(repo), target, "lane/b/t3")  # it may be an add at work
    _aged(other, lock)
    prepared = workspace.prepare(str(repo), target, "lane/b/t3")
    assert prepared.created and git("branch", "--show-current", cwd=target).strip() == "lane/b/t3"
    assert not other.exists() and not lock.exists()
    assert workspace.prepare(str(repo), tmp_path / "wt" / "t4", "lane/b/t4").created


def test_a_worktree_directory_git_lost_track_of_is_moved_aside_not_deleted(
    repo: Path, tmp_path: Path
) -> None:
    target = tmp_path / "wt" / "t5"
    target.mkdir(parents=True)
    (target / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 't5'}\n")
    (target / "notes.txt").write_text("uncommitted\n")
    assert workspace.prepare(str(repo), target, "lane/b/t5").created
    [aside] = (tmp_path / "wt").glob("t5.unusable-*")
    assert (aside / "notes.txt").read_text() == "uncommitted\n"


def test_every_moment_a_git_worktree_add_can_be_killed_at_is_recovered_from(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real adds, each killed (SIGKILL, with its children) after a random moment, then the
    task's worktree prepared again at once, as a restarted runner does; with the
    leftovers taken for dead at once, every one succeeds and its checkout is whole."""
    monkeypatch.setattr(interrupted, "STALE_AFTER", 0.0)
    for index in range(120):
        (repo / f"f{index}").write_text("x" * 2000)
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "files", cwd=repo)
    chance = random.Random(32)
    for n in range(40):
        target, branch = tmp_path / "wt" / f"k{n}", f"lane/b/k{n}"
        target.parent.mkdir(exist_ok=True)
        adding = subprocess.Popen(
            ["git", "worktree", "add", "-q", "-b", branch, str(target)], cwd=repo,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        time.sleep(chance.uniform(0, 0.03))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(adding.pid, signal.SIGKILL)
        adding.wait()
        prepared = workspace.prepare(str(repo), target, branch)
        assert git("branch", "--show-current", cwd=prepared.path).strip() == branch
        assert (prepared.path / "f119").exists()


def test_a_runner_killed_before_it_wrote_the_files_leaves_a_worktree_made_afresh(
    repo: Path, tmp_path: Path
) -> None:
    """What an older runner's add left when it was killed before it wrote the files: a worktree
    without its files, locked ``initializing``. The next prepare makes it afresh, whole
    (else a run would commit every file as deleted)."""
    target = tmp_path / "wt" / "t"
    target.parent.mkdir()
    git("worktree", "add", "--no-checkout", "--lock", "--reason", interrupted.INITIALIZING,
        "-b", "lane/b/t", str(target), cwd=repo)
    assert not (target / "README").exists()
    prepared = workspace.prepare(str(repo), target, "lane/b/t")
    assert (prepared.path / "README").read_text() == (repo / "README").read_text()
    assert git("status", "--porcelain", cwd=prepared.path) == ""
    assert "locked" not in git("worktree", "list", "--porcelain", cwd=repo)


def test_a_smudge_filter_planted_in_the_repository_never_runs_at_a_worktree_add(
    repo: Path, tmp_path: Path
) -> None:
    """Another task names a smudge filter for every file: the next task's worktree gets
    the files as the branch holds them, and the filter never runs."""
    marker = tmp_path / "smudged"
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    git("config", "filter.evil.smudge", f"sh -c 'touch {marker}; echo FORGED'", cwd=repo)
    prepared = workspace.prepare(str(repo), tmp_path / "wt" / "t", "lane/b/t")
    assert (prepared.path / "README").read_text() == git("show", "HEAD:README", cwd=repo)
    assert not marker.exists()


def test_concurrent_worktrees_of_one_repository(repo: Path, tmp_path: Path) -> None:
    errors: list[Exception] = []

    def make(index: int) -> None:
        try:
            workspace.prepare(str(repo), tmp_path / "wt" / f"t{index}", f"lane/b/t{index}")
        except Exception as error:  # noqa: BLE001 - collected for the assertion below
            errors.append(error)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for index in range(6):
        clone = tmp_path / "wt" / f"t{index}"
        assert git("branch", "--show-current", cwd=clone).strip() == f"lane/b/t{index}"
        assert taskgit.repository_of(clone) == (repo / ".git").resolve()
    assert len(taskgit.entries(repo / ".git")) == 6


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda tmp: None, "has no workspace"),
        (lambda tmp: str(tmp / "missing"), "does not exist"),
        (lambda tmp: str(tmp), "not a git repository"),
    ],
)
def test_an_unusable_workspace_says_how_to_fix_it(tmp_path: Path, setup, message: str) -> None:
    with pytest.raises(workspace.WorkspaceError, match=message):
        workspace.prepare(setup(tmp_path), tmp_path / "wt", "lane/b/t")


def test_a_repository_without_commits_is_refused_clearly(tmp_path: Path) -> None:
    git("init", "-q", cwd=tmp_path)
    with pytest.raises(workspace.WorkspaceError, match="at least one commit"):
        workspace.prepare(str(tmp_path), tmp_path.parent / "wt-empty", "lane/b/t")


def test_a_worktree_left_by_an_ended_run_is_taken_over_with_its_work(
    repo: Path, tmp_path: Path
) -> None:
    """A dead runner's home still holds the task's branch: the next run moves it to its own."""
    dead = tmp_path / "home1" / "worktrees" / "b" / "t"
    workspace.prepare(str(repo), dead, "lane/b/t", run=1, is_current=lambda run: False)
    (dead / "f").write_text("committed\n")
    git("add", "f", cwd=dead)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "work", cwd=dead)
    (dead / "draft").write_text("not committed yet\n")
    asked: list[int] = []

    def is_current(run: int) -> bool:
        asked.append(run)
        return False

    mine = tmp_path / "home2" / "worktrees" / "b" / "t"
    prepared = workspace.prepare(str(repo), mine, "lane/b/t", run=2, is_current=is_current)
    assert (prepared.path, prepared.taken_over_from) == (mine, dead)
    assert asked == [1]
    assert (mine / "f").read_text() == "committed\n"
    assert (mine / "draft").read_text() == "not committed yet\n"
    assert not dead.exists()
    assert git("branch", "--show-current", cwd=mine).strip() == "lane/b/t"
    assert "?? draft" in handoff.handoff(mine, "", "lane/b/t")


def test_a_stale_worktree_no_run_recorded_is_taken_over(repo: Path, tmp_path: Path) -> None:
    stale = tmp_path / "by-hand"
    git("worktree", "add", "-q", "-b", "lane/b/t", str(stale), cwd=repo)
    mine = tmp_path / "home" / "t"
    prepared = workspace.prepare(str(repo), mine, "lane/b/t", run=7, is_current=lambda run: True)
    assert prepared.taken_over_from == stale


def test_a_worktree_of_a_current_run_is_not_taken(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "home1" / "worktrees" / "b" / "t"
    workspace.prepare(str(repo), other, "lane/b/t", run=1)
    (other / "draft").write_text("in progress\n")
    mine = tmp_path / "home2" / "worktrees" / "b" / "t"
    with pytest.raises(workspace.WorkspaceBusy, match="run 1, which is still current"):
        workspace.prepare(str(repo), mine, "lane/b/t", run=2, is_current=lambda run: run == 1)
    assert (other / "draft").exists() and not mine.exists()


def test_git_s_refusal_is_quoted_without_a_wrong_cause(repo: Path, tmp_path: Path) -> None:
    """The main worktree cannot be moved or removed; git's words are given, not "needs a commit"."""
    git("checkout", "-q", "-b", "lane/b/t", cwd=repo)
    with pytest.raises(workspace.WorkspaceError) as caught:
        workspace.prepare(str(repo), tmp_path / "wt", "lane/b/t", run=2)
    assert "git said" in str(caught.value) and "at least one commit" not in str(caught.value)


def test_branch_names_git_refuses_are_hashed() -> None:
    assert workspace.branch_name("b", "task-1") == "lane/b/task-1"
    odd = workspace.branch_name("b", "a..b")
    assert odd.startswith("lane/b/task-") and ".." not in odd


def test_handoff_names_status_diff_and_output(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "wt"
    workspace.prepare(str(repo), target, "lane/b/t")
    (target / "README").write_text("changed\n")
    text = handoff.handoff(target, "x" * 10_000 + "last words", "lane/b/t")
    assert " M README" in text and "1 modified" in text.split("diff summary:")[1]
    assert text.rstrip().endswith("last words") and len(text) < 6000
    assert "branch lane/b/t" in text and "verify every claim" in text


def test_only_real_files_inside_the_worktree_are_artifacts(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "wt"
    workspace.prepare(str(repo), target, "lane/b/t")
    (target / "out").mkdir()
    (target / "out" / "report.txt").write_text("r\n")
    (tmp_path / "secret.txt").write_text("s\n")
    (target / "escape").symlink_to(tmp_path / "secret.txt")
    (target / "inner").symlink_to(target / "README")
    claimed = [
        "out/report.txt",
        str(target / "README"),
        "./out/report.txt",
        "missing.txt",
        "../secret.txt",
        str(tmp_path / "secret.txt"),
        "escape",
        "out",
        "",
        "inner",
    ]
    assert handoff.artifacts(target, claimed) == ["out/report.txt", "README"]


ID = st.text(alphabet="ab.-_1", min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))


@settings(max_examples=80, deadline=None)
@given(board=ID, task=ID)
def test_the_branch_rule_agrees_with_git_itself(board: str, task: str) -> None:
    name = f"lane/{board}/{task}"
    git_says = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, check=False
    )
    assert workspace.git_accepts(name) == (git_says.returncode == 0), name


def test_a_hanging_git_is_killed_with_what_it_started(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every git call has a deadline; the whole session goes, not only git."""
    import time

    monkeypatch.setattr(workspace, "GIT_TIMEOUT", 0.5)
    pid_file = tmp_path / "hang.pid"
    done = workspace._git("-c", f"alias.hang=!echo $$ > {pid_file}; exec sleep 600", "hang",
                          cwd=repo)
    assert done.returncode != 0
    assert "git -c" in done.stderr and "did not finish within 0.5 s: killed" in done.stderr
    pid = int(pid_file.read_text())
    for _ in range(200):  # killed: gone, or a zombie left for whichever process reaps it
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"git's child {pid} outlived the timeout")


@pytest.mark.skipif(os.geteuid() != 0, reason="running git as another user needs root")
def test_a_repository_the_worker_user_does_not_own_says_what_git_said() -> None:
    """Not "is not a git repository": git's own reason, and the two fixes."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="lane-runner-dubious-"))
    try:
        base.chmod(0o755)
        source = base / "repo"
        source.mkdir()
        git("init", "-q", "-b", "main", cwd=source)
        git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty",
            "-m", "i", cwd=source)
        worktree = base / "wt"
        with pytest.raises(workspace.WorkspaceError) as raised:
            workspace.prepare(str(source), worktree, "lane/b/t", owner="nobody")
        said = str(raised.value)
        assert f"detected dubious ownership in repository at '{source}'" in said
        assert f"chown -R nobody {source}" in said
        assert "git init" not in said and not worktree.exists()
        # the second fix, as said, works: the runner's git reads no global configuration,
        # so "git config --global" (the hint before) changed nothing it reads
        fix = (f"git config --system --add safe.directory {source} && "
               f"git config --system --add safe.directory {source}/.git")
        assert fix in said
        system = Path("/etc/gitconfig")
        kept = system.read_bytes() if system.exists() else None
        assert "where nobody can write it" in said
        subprocess.run(["chmod", "-R", "a+rwX", str(source)], check=True)
        try:
            subprocess.run(["sh", "-c", fix], check=True)
            workspace.prepare(str(source), worktree, "lane/b/t", owner="nobody")
        finally:
            system.write_bytes(kept) if kept is not None else system.unlink(missing_ok=True)
        # A host's directory (Hermes's dir:) in it is not taken for a plain directory.
        with pytest.raises(workspace.WorkspaceError, match="dubious ownership"):
            workspace.repository_of(source, owner="nobody")
        assert workspace.repository_of(source) == source
        assert workspace.repository_of(base) is None
    finally:
        shutil.rmtree(base)


def gated_hook(repository: Path, gate: Path, started: Path) -> None:
    """A reference-transaction hook (``git worktree add -b`` runs it, making the branch)
    that waits while ``gate`` exists."""
    hook = repository / ".git" / "hooks" / "reference-transaction"
    hook.write_text(f"#!/bin/sh\ntouch '{started}'\nwhile [ -e '{gate}' ]; do sleep 0.05; done\n")
    hook.chmod(0o755)


def test_a_slow_git_in_one_repository_does_not_hold_up_another(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worktrees are made one at a time per repository, not one at a time in the runner.
    The slow git is a hook, which only this test lets the runner's git run."""
    monkeypatch.setattr(git_module, "NEUTRAL", ())
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", "-b", "main", cwd=other)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "i",
        cwd=other)
    gate, started = tmp_path / "gate", tmp_path / "started"
    gate.touch()
    gated_hook(repo, gate, started)
    slow = threading.Thread(
        target=workspace.prepare, args=(str(repo), tmp_path / "wt" / "slow", "lane/b/slow")
    )
    slow.start()
    try:
        for _ in range(1200):
            if started.exists():
                break
            threading.Event().wait(0.05)
        assert started.exists(), "the slow repository's hook never ran"
        quick = threading.Thread(
            target=workspace.prepare, args=(str(other), tmp_path / "wt" / "quick", "lane/b/quick")
        )
        quick.start()
        quick.join(timeout=60)
        assert not quick.is_alive(), "a worktree of another repository waited for the slow git"
        assert slow.is_alive()  # still in its hook: the two really overlapped
    finally:
        gate.unlink()
        slow.join(timeout=60)
    assert (tmp_path / "wt" / "quick" / ".git").exists()
    assert (tmp_path / "wt" / "slow" / "README").exists()


def test_worktrees_of_one_repository_share_its_lock_whatever_path_names_it(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "service").mkdir()
    workspace.prepare(str(repo), tmp_path / "wt" / "t1", "lane/b/t1")
    common = {
        workspace._locate(path, None).common  # type: ignore[union-attr]
        for path in (repo, repo / "service")
    }
    assert common == {(repo / ".git").resolve()}


def commit_all(repository: Path, message: str) -> None:
    git("add", "-A", cwd=repository)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", message, cwd=repository)


def test_a_folder_of_a_repository_gets_the_repositorys_worktree_and_works_in_it(
    repo: Path, tmp_path: Path
) -> None:
    """``--workspace repo/service-a`` (a monorepo): the CLI works in service-a of the worktree."""
    (repo / "service-a").mkdir()
    (repo / "service-a" / "main.py").write_text("print()\n")
    commit_all(repo, "service")
    target = tmp_path / "wt" / "t1"
    made = workspace.prepare(str(repo / "service-a"), target, "lane/b/t1")
    assert (made.path, made.folder, made.cwd) == (target, "service-a", target / "service-a")
    assert (made.cwd / "main.py").exists() and (target / "README").exists()
    again = workspace.prepare(str(repo / "service-a"), target, "lane/b/t1")  # a resume
    assert (again.cwd, again.branch) == (target / "service-a", "lane/b/t1")
    assert handoff.artifacts(target, ["main.py", "../README"], base=made.cwd) == [
        "service-a/main.py", "README"
    ]


def test_a_folder_the_branch_does_not_have_is_refused_clearly(repo: Path, tmp_path: Path) -> None:
    (repo / "untracked").mkdir()
    with pytest.raises(workspace.WorkspaceError, match="folder untracked of its repository"):
        workspace.prepare(str(repo / "untracked"), tmp_path / "wt" / "t1", "lane/b/t1")


def test_a_branch_named_like_the_boards_folder_leaves_tasks_their_twin(
    repo: Path, tmp_path: Path
) -> None:
    """git cannot have lane/b/t1 beside a branch lane/b: the task works on lane-b-t1, and
    keeps it when its worktree is made again."""
    git("branch", "lane/b", cwd=repo)
    target = tmp_path / "wt" / "t1"
    made = workspace.prepare(str(repo), target, "lane/b/t1")
    assert made.branch == "lane-b-t1"
    assert git("branch", "--show-current", cwd=target).strip() == "lane-b-t1"
    (target / "work.txt").write_text("done\n")
    commit_all(target, "work")
    taskgit.publish(target, "lane-b-t1", git("rev-parse", "HEAD", cwd=target).strip(), None)
    assert workspace.remove(target, force=True) is None
    git("branch", "-D", "lane/b", cwd=repo)  # lane/b/t1 could be made now: the twin is kept
    again = workspace.prepare(str(repo), target, "lane/b/t1")
    assert again.branch == "lane-b-t1" and (target / "work.txt").exists()


def test_a_task_already_on_its_lane_branch_keeps_it(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "wt" / "t1"
    workspace.prepare(str(repo), target, "lane/b/t1")
    assert workspace.remove(target, force=True) is None
    assert workspace.prepare(str(repo), target, "lane/b/t1").branch == "lane/b/t1"


def test_the_checkouts_own_git_directory_is_readable_by_the_worker_under_any_umask() -> None:
    """The root daemon makes it, the worker's git reads it: under the systemd unit's
    UMask=0077 its files were root's alone and no worktree could be written (the pods'
    test found it)."""
    old = os.umask(0o077)
    try:
        shadow = checkout._shadow("sha1")
    finally:
        os.umask(old)
    try:
        for path in (shadow, shadow / "refs", shadow / "objects", shadow / "HEAD",
                     shadow / "config"):
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode & 0o004, f"{path} is {oct(mode)}: others cannot read it"
            assert not mode & 0o022, f"{path} is {oct(mode)}: others can write it"
    finally:
        shutil.rmtree(shadow)


def test_a_branch_checked_out_in_the_repositorys_own_worktree_is_not_cloned_beside_it(
    repo: Path, tmp_path: Path
) -> None:
    """With no linked worktree, git is not asked to list them (issue 46): the repository's
    own checkout is still seen holding the task's branch, and the task is refused as
    before rather than cloned and then unpublishable. Catches: the holder looked for only
    among linked worktrees."""
    git("checkout", "-q", "-b", "lane/b/t1", cwd=repo)
    with pytest.raises(workspace.WorkspaceError, match="cannot take over the worktree at"):
        workspace.prepare(str(repo), tmp_path / "wt" / "t1", "lane/b/t1")
