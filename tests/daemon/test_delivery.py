"""An accepted result is a commit on the task's branch, made exactly once (issue 31).

In process, on real parts: a real repository, the simulated CLIs, the SQLite board.
The crash between the commit and the journal's pending record is a real SIGKILL of a
real daemon, by the repository's own post-commit hook (so at exactly that point).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from lane_runner.board.model import Outcome, Status
from lane_runner.providers.simulators.play import OUTPUT_FILE
from lane_runner.run import branchhead, cleanup, delivery, handoff, undelivered, workspace
from lane_runner.run import context as contexts
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import Services
from tests.daemon.test_executor import claim, services  # noqa: F401 - the fixture
from tests.harness import BOARD, Lane, git, hold_commit


def branch_of(lane: Lane, task_id: str) -> str:
    return workspace.branch_name(BOARD, task_id)


def log(lane: Lane, span: str, fmt: str = "%H", where: Path | None = None) -> list[str]:
    """The commits of ``span`` in the repository (or in ``where``, a task's clone)."""
    said = subprocess.run(
        ["git", "log", f"--format={fmt}%x1e", *span.split()],
        cwd=where or lane.repo, capture_output=True, text=True, check=True,
    )
    return [entry.strip("\n") for entry in said.stdout.split("\x1e") if entry.strip()]


def status(path: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=path, capture_output=True, text=True, check=True
    ).stdout


def completed_data(lane: Lane, task_id: str) -> dict[str, object]:
    """The metadata the board's completed event carries."""
    [event] = [e for e in lane.board.events(task_id) if e.kind == "completed"]
    return event.data["metadata"]  # type: ignore[no-any-return]


def test_the_result_is_one_commit_on_the_task_branch_with_trailers_and_a_diff_stat(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    task = lane.add("Write the output file", assignee="cli-codex-low")
    report = RunExecutor(services, claim(services, lane)).execute()
    assert report.ended == "committed"
    branch = branch_of(lane, task.id)
    [sha] = log(lane, f"main..{branch}")
    [message] = log(lane, f"-1 {sha}", "%B")
    run_id = lane.board.get_task(task.id).completed_run_id
    assert message.startswith("Write the output file\n\nsimulated work done in turn 1\n\n")
    assert f"Lane-Task: {BOARD}/{task.id}\nLane-Run: {run_id}\nLane-Provider: codex\n" in message
    [author] = log(lane, f"-1 {sha}", "%an <%ae>|%cn <%ce>")
    assert author == "lane-runner <lane-runner@localhost>|lane-runner <lane-runner@localhost>"
    shown = subprocess.run(
        ["git", "show", "--name-only", "--format=", sha],
        cwd=lane.repo, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert shown == [OUTPUT_FILE]
    assert status(lane.home.worktree(BOARD, task.id)) == ""
    delivered = completed_data(lane, task.id)["delivery"]
    assert isinstance(delivered, dict)
    assert delivered["commit"] == sha and delivered["commits"] == [sha]
    assert delivered["branch"] == branch and delivered["files_changed"] == 1
    assert OUTPUT_FILE in delivered["diffstat"] and "1 file changed" in delivered["diffstat"]


def test_a_worker_that_committed_by_itself_is_respected(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    """The worker's commit is kept as it is; the runner's, empty, carries the result."""
    task = lane.add("commits itself", body="[sim:commit]", assignee="cli-claude-low")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    runner, worker = log(lane, f"main..{branch_of(lane, task.id)}", "%H %s")
    assert worker.endswith(" simulated worker commit, turn 1")
    assert runner.endswith(" commits itself")
    changed = subprocess.run(
        ["git", "show", "--name-only", "--format=", runner.split()[0]],
        cwd=lane.repo, capture_output=True, text=True, check=True,
    ).stdout
    assert changed == ""  # nothing was left for the runner's commit but the result
    delivered = completed_data(lane, task.id)["delivery"]
    assert isinstance(delivered, dict)
    assert delivered["commit"] == runner.split()[0] and len(delivered["commits"]) == 2


def test_nothing_to_commit_is_a_valid_result(services: Services, lane: Lane) -> None:  # noqa: F811
    """No change: one empty commit, which carries the result and names the run."""
    task = lane.add("nothing to do", body="[sim:nochange]")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE
    [made] = log(lane, f"main..{branch_of(lane, task.id)}")
    [message] = log(lane, f"-1 {made}", "%B")
    assert f"Lane-Run: {done.completed_run_id}\n" in message
    carried = delivery.Carried.read(message)
    assert carried is not None and carried.result == done.result
    delivered = completed_data(lane, task.id)["delivery"]
    assert isinstance(delivered, dict)
    assert (delivered["commit"], delivered["commits"], delivered["diffstat"]) == (made, [made], "")


class Stop(BaseException):
    """The runner stopping dead at one point (what a kill -9 leaves, in process)."""


def test_a_run_stopped_before_its_commit_is_delivered_by_the_next_one(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """The lane state kept the accepted result; the next run commits it, once, without
    running the provider again (the simulator would append a second line)."""
    task = lane.add("stopped at the commit")

    def stop(*args: object, **kwargs: object) -> None:
        raise Stop

    first = claim(services, lane)
    with monkeypatch.context() as patch:
        patch.setattr(delivery, "commit", stop)
        with pytest.raises(Stop):
            RunExecutor(services, first).execute()
    lane.board.reclaim(first.run.id, "the runner restarted", Outcome.RECLAIMED)
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    [message] = log(lane, f"main..{branch_of(lane, task.id)}", "%B")
    assert f"Lane-Run: {first.run.id}\n" in message  # the answer's run, as accepted
    worktree = lane.home.worktree(BOARD, task.id)
    assert (worktree / OUTPUT_FILE).read_text().count("turn") == 1
    assert len(lane.lane_state(task.id)["attempts"]) == 1  # type: ignore[arg-type]


def test_commit_messages_escape_control_characters_and_bound_the_summary() -> None:
    facts = delivery.Facts(
        "b", "t", 7, "a\ttitle\x1b[31m\nwith lines", "ok\x1b]0;x\x07\n" + "y" * 20_000,
        "codex", "m",
    )
    message = facts.message()
    assert message.startswith("a title\\x1b[31m with lines\n\nok\\x1b]0;x\\x07\n")
    assert "\x1b" not in message and "\n[cut]\n" in message
    assert message.endswith("Lane-Task: b/t\nLane-Run: 7\nLane-Provider: codex\nLane-Model: m\n")


def test_the_commit_of_a_run_is_found_by_its_trailers_only(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
    base = delivery.head(repo)
    git("commit", "-q", "--allow-empty", "-m", "mentions Lane-Run: 3 in passing", cwd=repo)
    author = delivery.Author.of("me <me@example.org>")
    (repo / "f").write_text("x")
    facts = delivery.Facts("b", "t", 3, "title", "summary", "codex", "m")
    made = delivery.deliver(repo, "main", base, facts, author)
    assert made.commit is not None and len(made.commits) == 2
    assert delivery.find(repo, base, "b", "t", 3, None) == made.commit
    assert delivery.find(repo, base, "b", "t", 4, None) is None
    again = delivery.deliver(repo, "main", base, facts, author)
    assert again.commit == made.commit and again.commits == made.commits


def test_a_kill_9_between_the_commit_and_the_pending_record_leaves_one_commit(
    lane: Lane,
) -> None:
    """The daemon is SIGKILLed while its commit exists and its git has not returned,
    so before the journal has a pending record. Restarted, it finishes the task with
    exactly that one commit on the branch, and without running the CLI again."""
    held, release = lane.root / "commit-held", lane.root / "commit-release"
    lane.extra_env.update(hold_commit(held, release))
    task = lane.add("crash at the commit", assignee="cli-codex-low")
    daemon = lane.start()
    lane.wait(held.exists, what="the runner's commit")
    daemon.send_signal(signal.SIGKILL)
    assert daemon.wait(timeout=30) == -signal.SIGKILL
    release.touch()
    branch = branch_of(lane, task.id)
    # Made in the task's clone; the repository gets it once the runner publishes it.
    [made] = log(lane, f"main..{branch}", where=lane.home.worktree(BOARD, task.id))
    assert log(lane, f"main..{branch}") == []
    assert list(lane.home.lane_dir(BOARD).glob("*.terminal.*")) == []
    assert lane.board.get_task(task.id).status is Status.RUNNING
    assert lane.start("--until-idle").wait(timeout=120) == 0
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE
    assert log(lane, f"main..{branch}") == [made]
    worktree = lane.home.worktree(BOARD, task.id)
    assert status(worktree) == ""
    assert (worktree / OUTPUT_FILE).read_text().count("turn") == 1
    assert len(lane.lane_state(task.id)["attempts"]) == 1  # type: ignore[arg-type]
    delivered = completed_data(lane, task.id)["delivery"]
    assert isinstance(delivered, dict) and delivered["commit"] == made
    record = orjson.loads(
        (lane.home.lane_dir(BOARD) / f"{task.id}.run-{done.completed_run_id}"
         ".terminal.committed.json").read_bytes()
    )
    assert record["metadata"]["delivery"]["commits"] == [made]


def test_a_goal_turn_is_told_the_commits_on_its_branch(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """A before_run hook commits on the branch; the second goal turn's prompt names it."""
    services.cfg = services.cfg.replace(hooks={"*": {"before_run": (
        "echo prep > prep.txt && git add prep.txt && "
        "git -c user.name=p -c user.email=p@localhost commit -qm 'prepared by a hook'"
    )}})
    continuations: list[str] = []
    original = contexts.worker_prompt

    def recording(context: str, handoff: str = "", continuation: str = "") -> str:
        continuations.append(continuation)
        return original(context, handoff, continuation)

    monkeypatch.setattr(contexts, "worker_prompt", recording)
    task = lane.add("two turns", body="[sim:goal:2]", goal_turns=2)
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    assert continuations[0] == ""
    assert f"Commits on branch {branch_of(lane, task.id)} so far:\n" in continuations[1]
    assert "prepared by a hook" in continuations[1]


def test_a_handoff_lists_the_commits_since_the_branch_began(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
    base = delivery.head(repo)
    git("commit", "-q", "--allow-empty", "-m", "first step", cwd=repo)
    commits = delivery.commit_log(repo, base)
    assert commits.endswith(" first step") and "base" not in commits
    text = handoff.handoff(repo, "", "main", commits=commits)
    assert f"commits on the branch so far:\n{commits}\n" in text


def symbolic_head(path: Path) -> str:
    return subprocess.run(
        ["git", "symbolic-ref", "--quiet", "HEAD"], cwd=path, capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.parametrize("moved", ["branch", "detach", "branch:commit", "detach:commit"])
def test_a_worker_that_moved_head_has_its_result_on_the_task_branch(
    services: Services, lane: Lane, moved: str  # noqa: F811
) -> None:
    """``git checkout -b fix`` or ``--detach`` by the worker, with its edit left uncommitted
    or committed by itself: the task's branch is fast-forwarded to the work and checked out
    again, so the result's commit is on it and is the head the board names."""
    task = lane.add("moves HEAD", body=f"[sim:checkout:{moved}]")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    branch = branch_of(lane, task.id)
    worktree = lane.home.worktree(BOARD, task.id)
    assert symbolic_head(worktree) == f"refs/heads/{branch}"
    commits = log(lane, f"main..{branch}")  # newest first
    made = commits[0]  # the runner's, carrying the result; the worker's own below it
    assert len(commits) == (2 if moved.endswith(":commit") else 1)
    edited = subprocess.run(["git", "show", "--name-only", "--format=", commits[-1]],
                            cwd=lane.repo, capture_output=True, text=True, check=True)
    assert edited.stdout.split() == [OUTPUT_FILE] and status(worktree) == ""
    delivered = completed_data(lane, task.id)["delivery"]
    assert isinstance(delivered, dict) and delivered["head"] == made
    assert delivered["commits"] == commits[::-1]


def test_a_worker_that_left_the_branch_behind_blocks_the_task_naming_head(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    """HEAD on a branch with no commit (``git checkout --orphan``): which work is the result
    is a person's call. The task is blocked needs_input naming where HEAD is; once a person
    puts the work on the task's branch and unblocks it, the kept result is delivered there,
    without the CLI running again."""
    task = lane.add("orphaned", body="[sim:checkout:orphan]")
    first = claim(services, lane)
    assert RunExecutor(services, first).execute().ended == "block"
    blocked = lane.board.get_task(task.id)
    assert blocked.status is Status.BLOCKED and blocked.block_kind == "needs_input"
    branch = branch_of(lane, task.id)
    [run] = lane.runs(task.id)
    assert "the worker left HEAD on branch elsewhere, with no commit yet" in (run.reason or "")
    assert f"put the work on {branch}" in (run.reason or "")
    assert log(lane, f"main..{branch}") == []
    assert lane.lane_state(task.id)["delivery"]["stage"] == "accepted"  # type: ignore[index]

    worktree = lane.home.worktree(BOARD, task.id)
    git("symbolic-ref", "HEAD", f"refs/heads/{branch}", cwd=worktree)  # the person's fix
    lane.board.unblock(task.id)
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    [message] = log(lane, f"main..{branch}", "%B")
    assert f"Lane-Run: {first.run.id}\n" in message
    assert (worktree / OUTPUT_FILE).read_text().count("turn") == 1
    assert len(lane.lane_state(task.id)["attempts"]) == 1  # type: ignore[arg-type]


def test_head_detached_at_an_older_commit_is_refused_naming_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "older", cwd=repo)
    older = delivery.head(repo)
    git("commit", "-q", "--allow-empty", "-m", "tip", cwd=repo)
    tip = delivery.head(repo)
    assert older is not None and tip is not None
    git("checkout", "-q", "--detach", older, cwd=repo)
    with pytest.raises(branchhead.HeadElsewhere) as refused:
        branchhead.bring_back(repo, "main")
    assert str(refused.value) == (
        f"the worker left HEAD detached at {older[:12]}, not on the task's branch main "
        f"(at {tip[:12]}) nor ahead of it, so the result is not on that branch"
    )
    assert delivery.head(repo) == older and symbolic_head(repo) == ""  # nothing moved


def test_a_home_without_the_lane_state_delivers_the_result_its_commit_carries(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """What another home meets (issue 48): the run that committed stopped before its pending
    record, and the next run has no lane state of it, only the branch. It delivers the
    result the commit carries, without the provider and without a second commit; the
    home that still kept the result in its lane state clears it at its next recovery."""
    task = lane.add("stopped after the commit")
    first = claim(services, lane)

    def stop(*args: object, **kwargs: object) -> None:
        raise Stop

    with monkeypatch.context() as patch:
        patch.setattr(services.journal, "write_pending", stop)
        with pytest.raises(Stop):
            RunExecutor(services, first).execute()
    state_file = lane.home.lane_dir(BOARD) / f"{task.id}.json"
    kept = state_file.read_bytes()  # the home that stopped: its lane state holds the result
    accepted = orjson.loads(kept)["delivery"]
    state_file.unlink()  # the next run is another home's: it knows the branch only
    lane.board.reclaim(first.run.id, "the runner restarted", Outcome.RECLAIMED)
    [made] = log(lane, f"main..{branch_of(lane, task.id)}")

    second = claim(services, lane)
    assert RunExecutor(services, second).execute().ended == "committed"
    assert log(lane, f"main..{branch_of(lane, task.id)}") == [made]
    worktree = lane.home.worktree(BOARD, task.id)
    assert (worktree / OUTPUT_FILE).read_text().count("turn") == 1
    assert lane.lane_state(task.id)["attempts"] == []
    done = lane.board.get_task(task.id)
    assert done.completed_run_id == second.run.id and done.result == accepted["result"]
    delivered = completed_data(lane, task.id)["delivery"]
    assert isinstance(delivered, dict)
    base = log(lane, "-1 main")[0]
    assert (delivered["base"], delivered["commit"], delivered["commits"]) == (base, made, [made])

    state_file.write_bytes(kept)  # the stopped home's lane state, still `accepted`
    cleanup.sweep(services, cleanup.retention(services.cfg), time.time(), lambda: False)
    assert lane.lane_state(task.id)["delivery"] is None  # the daemon's sweep clears it
    state_file.write_bytes(kept)
    board = services.store.board(BOARD)
    lanes = lane.home.lane_dir(BOARD)
    [cleared] = undelivered.reconcile(board, services.journal, lanes, BOARD)
    assert (cleared.accepted_run, cleared.delivered_by) == (first.run.id, second.run.id)
    assert lane.lane_state(task.id)["delivery"] is None
    assert undelivered.reconcile(board, services.journal, lanes, BOARD) == []
