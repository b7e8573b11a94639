"""The runner's own git runs none of the code a task can plant in its repository (issue 47).

Each attack is planted from inside the task, by its ``before_run`` hook (code running as
the worker user in the task's worktree, as the agent's commands would): a hook in the
repository's ``hooks`` folder, a clean filter (``info/attributes`` and the driver in the
repository's configuration), an fsmonitor, a signing program. Each planted program only
touches a marker file; the runner then commits the task's result, and the task must be
done with the marker absent and its commit holding exactly what the worktree holds. On
the runner before issue 47 (``git add --all`` and ``git commit --no-verify``) every one
of them runs: the marker is there, or (signing, a filter that fails) the task is blocked.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lane_runner.board.model import Status
from lane_runner.providers.simulators.play import OUTPUT_FILE
from lane_runner.run import delivery, push, snapshot, workspace
from lane_runner.run import git as git_module
from tests.harness import BOARD, Lane

#: A program the task plants: it leaves the marker, then does what its kind must (a
#: filter passes its input on changed, a signer fails).
PROGRAM = '#!/bin/sh\ntouch "{marker}"\n{then}\n'

#: Shell run as the task's ``before_run`` hook; ``{program}`` is the planted program's path.
PLANT_HOOK = (
    'hooks="$(git rev-parse --path-format=absolute --git-common-dir)/hooks"; '
    'mkdir -p "$hooks"; cp "{program}" "$hooks/{name}"; chmod +x "$hooks/{name}"'
)
ATTACKS = {
    "post-commit": (PLANT_HOOK, ""),
    "prepare-commit-msg": (PLANT_HOOK, 'echo FORGED > "$1"'),
    "reference-transaction": (PLANT_HOOK, ""),
    "post-index-change": (PLANT_HOOK, ""),
    "pre-push": (PLANT_HOOK, ""),
    "clean-filter": (
        'common="$(git rev-parse --path-format=absolute --git-common-dir)"; '
        'mkdir -p "$common/info"; echo "* filter=evil" >> "$common/info/attributes"; '
        'git config filter.evil.clean "{program}"',
        "echo FORGED",
    ),
    "fsmonitor": ('git config core.fsmonitor "{program}"', "exit 1"),
    "gpg-program": (
        'git config commit.gpgSign true; git config gpg.program "{program}"', "exit 1"
    ),
}


def plant(lane: Lane, attack: str) -> Path:
    """The task's ``before_run`` plants ``attack``; the marker its program would leave."""
    marker, program = lane.root / f"{attack}.ran", lane.root / f"{attack}.sh"
    shell, then = ATTACKS[attack]
    program.write_text(PROGRAM.format(marker=marker, then=then))
    program.chmod(0o755)
    script = shell.format(program=program, name=attack)
    lane.write_config(hooks={"*": {"before_run": script}})
    return marker


def show(worktree: Path, *args: str) -> bytes:
    """git's bytes, as a person would see them (git of the test, not the runner's)."""
    return subprocess.run(["git", *args], cwd=worktree, capture_output=True, check=True).stdout


def assert_committed_as_it_is(worktree: Path) -> None:
    """The result commit holds the worktree's files byte for byte, and its message is the
    runner's (trailers and all)."""
    assert show(worktree, "show", f"HEAD:{OUTPUT_FILE}") == (worktree / OUTPUT_FILE).read_bytes()
    message = show(worktree, "log", "-1", "--format=%B").decode()
    assert "Lane-Task: " in message and "FORGED" not in message


@pytest.mark.parametrize("attack", sorted(set(ATTACKS) - {"pre-push"}))  # a push: below
def test_what_a_task_plants_in_its_repository_never_runs_in_the_runners_git(
    lane: Lane, attack: str
) -> None:
    marker = plant(lane, attack)
    task = lane.add(f"plants a {attack}")
    assert lane.start("--until-idle").wait(timeout=120) == 0
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE, done.block_reason
    assert not marker.exists(), f"the runner's git ran the task's {attack}"
    assert_committed_as_it_is(lane.home.worktree(BOARD, task.id))
    assert workspace.branch_name(BOARD, task.id) in show(
        lane.home.worktree(BOARD, task.id), "branch", "--show-current"
    ).decode()


def test_what_a_task_plants_for_the_push_never_runs_and_the_result_is_pushed(
    lane: Lane,
) -> None:
    """A pre-push hook, and a receive-pack of the task's choosing for the local remote (git
    runs it on this machine, as the worker): neither runs, and the board's commit reaches
    the remote."""
    remote = lane.root / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=lane.root)
    git("remote", "add", "origin", str(remote), cwd=lane.repo)
    hook = plant(lane, "pre-push")
    receive = lane.root / "receive-pack.ran"
    program = lane.root / "receive-pack.sh"
    program.write_text(PROGRAM.format(marker=receive, then="exit 1"))
    program.chmod(0o755)
    planting = ATTACKS["pre-push"][0].format(program=lane.root / "pre-push.sh", name="pre-push")
    lane.write_config(push="on_done", hooks={"*": {"before_run": (
        f'{planting}; git config remote.origin.receivepack "{program}"'
    )}})
    task = lane.add("plants for the push")
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert lane.board.get_task(task.id).status is Status.DONE
    assert not hook.exists() and not receive.exists()
    branch = workspace.branch_name(BOARD, task.id)
    [event] = [e for e in lane.board.events(task.id) if e.kind == "completed"]
    head = event.data["metadata"]["delivery"]["head"]
    assert git("rev-parse", f"refs/heads/{branch}", cwd=remote).strip() == head


def test_the_push_takes_its_ssh_command_from_the_worker_not_the_repository(
    tmp_path: Path,
) -> None:
    """The repository names an SSH command (and an askpass, a credential helper): the
    push runs plain ``ssh`` instead (which cannot reach the made-up host)."""
    repo = repository(tmp_path)
    marker = tmp_path / "ssh.ran"
    program = tmp_path / "ssh.sh"
    program.write_text(PROGRAM.format(marker=marker, then="exit 1"))
    program.chmod(0o755)
    for key in ("core.sshCommand", "core.askPass", "credential.helper"):
        git("config", key, str(program), cwd=repo)
    git("remote", "add", "origin", "ssh://lane-runner.invalid/x.git", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo).strip()
    pushed = push.push(repo, "origin", "main", head, wait=lambda seconds: True)
    assert not pushed.ok and not marker.exists(), pushed.said
    assert "lane-runner.invalid" in pushed.said


# -- the staging, without filters -------------------------------------------------------


def repository(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "kept").write_text("kept\n")
    (repo / "gone").write_text("gone\n")
    (repo / "modes").write_text("#!/bin/sh\n")
    (repo / ".gitignore").write_text("*.log\n")
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "init", cwd=repo)
    return repo


def odd_worktree(repo: Path) -> None:
    """What a worker leaves: edits, a deletion, an executable bit, links, names git quotes,
    a name that is not UTF-8, an ignored file, a FIFO, a folder behind a link."""
    (repo / "kept").write_text("changed\n")
    (repo / "gone").unlink()
    (repo / "modes").chmod(0o755)
    (repo / "new dir").mkdir()
    (repo / "new dir" / 'quote"and\\back\nline\tand ü').write_text("odd name\n")
    (repo / os.fsdecode(b"latin-\xe9")).write_bytes(b"\xe9\r\n")
    (repo / "link").symlink_to("kept")
    (repo / "dangling").symlink_to("/nowhere/at/all")
    (repo / "debug.log").write_text("ignored\n")
    os.mkfifo(repo / "fifo")
    (repo / "via-link").symlink_to(repo / "new dir")


def git(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True, text=True,
                          env=env).stdout


def test_the_runners_staging_stages_what_git_add_all_stages_without_filters(
    tmp_path: Path,
) -> None:
    """Byte for byte, mode for mode, the tree ``git add --all`` writes in a repository
    without filters (both pass over the FIFO and the ignored file)."""
    repo = repository(tmp_path)
    odd_worktree(repo)
    _taken, tree = snapshot.stage(repo, None)
    index = tmp_path / "reference-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    git("read-tree", "HEAD", cwd=repo, env=env)
    git("add", "--all", cwd=repo, env=env)
    assert tree == git("write-tree", cwd=repo, env=env).strip()
    assert "\tfifo" not in git("ls-tree", "-r", tree, cwd=repo)


def test_a_clean_filter_planted_in_the_repository_changes_nothing_the_runner_stages(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path)
    marker = tmp_path / "filtered"
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    git("config", "filter.evil.clean", f"sh -c 'touch {marker}; echo FORGED'", cwd=repo)
    (repo / "kept").write_text("the worker's words\n")
    _taken, tree = snapshot.stage(repo, None)
    assert git("cat-file", "blob", f"{tree}:kept", cwd=repo) == "the worker's words\n"
    assert snapshot.changes(repo, None) == [" M kept"]
    assert not marker.exists()


def test_an_index_rewritten_while_the_runner_stages_is_refused_with_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another task adds an entry to the index between the runner's staging and its
    ``write-tree``: the tree is not the one staged, and the commit is refused."""
    repo = repository(tmp_path)
    (repo / "kept").write_text("mine\n")
    (tmp_path / "planted").write_text("planted\n")
    planted = git("hash-object", "-w", str(tmp_path / "planted"), cwd=repo).strip()
    run = git_module.run

    def neighbour(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        if args[0] == "write-tree":
            git("update-index", "--add", "--cacheinfo", f"100644,{planted},planted", cwd=repo)
        return run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(git_module, "run", neighbour)
    with pytest.raises(snapshot.StagingError, match="is not what the runner staged") as raised:
        snapshot.stage(repo, None)
    assert "planted: staged nothing, the tree holds 100644 " in str(raised.value)


def test_a_result_commit_that_is_not_what_was_staged_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path)
    head = git("rev-parse", "HEAD", cwd=repo).strip()
    tree = git("rev-parse", "HEAD^{tree}", cwd=repo).strip()
    assert delivery.checked_commit(repo, head, tree, None) == head
    empty = git("hash-object", "-t", "tree", "-w", "/dev/null", cwd=repo).strip()
    with pytest.raises(delivery.DeliveryError, match=f"holds tree {tree[:12]}, not the tree "
                       f"{empty[:12]} the runner staged"):
        delivery.checked_commit(repo, head, empty, None)
    other = git("commit-tree", "-m", "elsewhere", empty, cwd=repo).strip()
    with pytest.raises(delivery.DeliveryError, match=f"HEAD is at {head[:12]}, not at the "
                       f"result commit {other[:12]}"):
        delivery.checked_commit(repo, other, empty, None)


def test_removing_a_worktree_runs_no_clean_filter_and_keeps_uncommitted_work(
    tmp_path: Path,
) -> None:
    """git's own check before a plain ``worktree remove`` is a ``git status``, which runs
    the clean filter a task planted: the runner tells uncommitted work itself."""
    repo = repository(tmp_path)
    marker = tmp_path / "filtered"
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    git("config", "filter.evil.clean", f"sh -c 'touch {marker}; cat'", cwd=repo)
    clean = workspace.prepare(str(repo), tmp_path / "wt" / "clean", "lane/b/clean").path
    os.utime(clean / "kept", (0, 0))  # git's stat cache says nothing: it would hash the file
    assert workspace.remove(clean) is None and not clean.exists()
    assert not marker.exists(), "removing the worktree ran the task's clean filter"
    kept = workspace.prepare(str(repo), tmp_path / "wt" / "kept", "lane/b/kept").path
    (kept / "kept").write_text("uncommitted\n")
    assert "holds uncommitted changes (1 path(s))" in (workspace.remove(kept) or "")
    assert (kept / "kept").read_text() == "uncommitted\n"
