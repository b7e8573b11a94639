"""One run carried by the executor in-process, on real parts, with a disk that fills up."""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import time

import pytest

from journal import Journal, LinuxFS
from lane_runner import config
from lane_runner.board.model import NewTask, Outcome, Status
from lane_runner.providers import sandbox
from lane_runner.router import health
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import Services, build
from tests.harness import BOARD, Lane


class FullDisk(LinuxFS):
    """Every write and create fails with ENOSPC once ``full`` is set."""

    full = False

    def create(self, dir_fd: int, name: str) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        return super().create(dir_fd, name)

    def write(self, fd: int, data: bytes) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(fd, data)


@pytest.fixture
def services(lane: Lane, monkeypatch: pytest.MonkeyPatch) -> Services:
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("LANE_RUNNER_SIM_CONTROL", str(lane.control))
    built = build(config.load(lane.root, {}))
    yield built
    built.close()


def claim(services: Services, lane: Lane):
    found = services.store.board(BOARD).claim(services.node, 60, "cli-auto")
    assert found is not None
    return found


def test_an_accepted_result_is_committed_with_its_route(services: Services, lane: Lane) -> None:
    task = lane.add("in process", assignee="cli-claude-low")
    report = RunExecutor(services, claim(services, lane)).execute()
    assert (report.ended, report.provider) == ("committed", "claude")
    done = lane.board.get_task(task.id)
    assert done.status is Status.DONE and done.result is not None
    assert any(c.body.startswith("route: claude/") for c in lane.board.comments(task.id))


def test_a_full_disk_before_the_result_is_a_cooldown_not_a_failure(
    services: Services, lane: Lane
) -> None:
    disk = FullDisk()
    services.journal = Journal(lane.home.lanes, fs=disk)
    task = lane.add("disk fills up")
    disk.full = True
    report = RunExecutor(services, claim(services, lane)).execute()
    assert report.ended == "cooldown" and "No space left" in report.reason
    waiting = lane.board.get_task(task.id)
    assert waiting.status is Status.READY and waiting.failure_count == 0
    assert waiting.next_attempt_at is not None
    disk.full = False
    time.sleep(max(0.0, waiting.next_attempt_at - time.time()) + 0.05)  # cooldown_base 0.3 s
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    assert lane.board.get_task(task.id).status is Status.DONE


def test_a_task_without_a_workspace_is_blocked_as_capability(
    services: Services, lane: Lane
) -> None:
    task = lane.board.add_task(NewTask(title="nowhere"))
    report = RunExecutor(services, claim(services, lane)).execute()
    assert report.ended == "block"
    blocked = lane.board.get_task(task.id)
    assert blocked.status is Status.BLOCKED and blocked.block_kind.value == "capability"
    assert "--workspace" in (blocked.block_reason or "")


def test_a_worker_that_says_blocked_blocks_for_a_person(services: Services, lane: Lane) -> None:
    task = lane.add("needs a key", body="[sim:blocked]")
    RunExecutor(services, claim(services, lane)).execute()
    blocked = lane.board.get_task(task.id)
    assert blocked.status is Status.BLOCKED and blocked.block_kind.value == "needs_input"


def test_a_crashing_cli_is_a_counted_failure_until_the_task_gives_up(
    services: Services, lane: Lane
) -> None:
    task = lane.add("always crashes", body="[sim:crash]")
    for _ in range(3):
        RunExecutor(services, claim(services, lane)).execute()
    gave_up = lane.board.get_task(task.id)
    assert gave_up.status is Status.BLOCKED and gave_up.block_kind.value == "gave_up"
    assert all(r.outcome in (Outcome.FAILED, Outcome.BLOCKED) for r in lane.runs(task.id))


def test_a_give_up_promises_no_next_attempt_and_one_turn_is_no_goal_turn(
    services: Services, lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    """With a failure backoff, a retried failure says when the next attempt comes; the
    failure that gives up has none to promise. A task of one turn is not told in turns."""
    services.cfg = dataclasses.replace(services.cfg, failure_backoff_base=120.0)
    task = lane.board.add_task(NewTask(
        title="crashes once", body="[sim:crash]", assignee="cli-codex-low",
        workspace=str(lane.repo), max_retries=0,
    ))
    with caplog.at_level(logging.INFO, logger="lane_runner.run.goal"):
        RunExecutor(services, claim(services, lane)).execute()
    gave_up = lane.board.get_task(task.id)
    assert gave_up.status is Status.BLOCKED and gave_up.block_kind.value == "gave_up"
    assert "next attempt" not in (gave_up.block_reason or ""), gave_up.block_reason
    assert "panicked at" in (gave_up.block_reason or "")
    decided = [r.getMessage() for r in caplog.records if "-> " in r.getMessage()]
    assert decided and not any("turn" in line for line in decided), decided


def test_claude_as_root_without_a_declared_sandbox_falls_back_to_the_next_provider(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next installed one in the registry's order: with every (simulated) CLI, opencode."""
    if os.geteuid() != 0:
        pytest.skip("the claude root guard only applies to root")
    monkeypatch.delenv("IS_SANDBOX")
    task = lane.add("claude lane", assignee="cli-claude-medium")
    report = RunExecutor(services, claim(services, lane)).execute()
    assert (report.ended, report.provider) == ("committed", "opencode")
    notes = " ".join(c.body for c in lane.board.comments(task.id))
    assert "worker_user" in notes


def test_a_cli_that_refuses_the_runners_argv_is_misconfigured_not_the_tasks_failure(
    services: Services, lane: Lane
) -> None:
    """An older codex without a flag the runner passes: marked in provider health with
    the CLI's words, the task falls back to claude and spends none of its budget."""
    refusing = lane.root / "old-codex"
    refusing.write_text(
        "#!/bin/sh\n"
        "echo \"error: unexpected argument '--dangerously-bypass-hook-trust' found\" >&2\n"
        "exit 2\n"
    )
    refusing.chmod(0o755)
    services.binaries["codex"] = refusing
    task = lane.add("old codex", assignee="cli-codex-low")
    report = RunExecutor(services, claim(services, lane)).execute()
    assert (report.ended, report.provider) == ("committed", "claude")
    assert lane.board.get_task(task.id).failure_count == 0
    recorded = health.read_health(lane.home.provider_health, "codex")
    assert recorded is not None and recorded.misconfigured
    assert recorded.reason == "error: unexpected argument '--dangerously-bypass-hook-trust' found"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_nul_in_the_worker_answer_still_commits(
    lane: Lane, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, backend: str
) -> None:
    """PostgreSQL text cannot hold NUL: the answer is made storable before the journal."""
    monkeypatch.setenv("IS_SANDBOX", "1")
    environ = {}
    if backend == "postgres":
        environ["LANE_RUNNER_BOARD_URL"] = request.getfixturevalue("postgres_database")
    built = build(config.load(lane.root, environ))
    try:
        if backend == "postgres":
            built.store.create_board(BOARD)
        board = built.store.board(BOARD)
        new = NewTask(
            title="nul", body="[sim:nul]", assignee="cli-codex-low", workspace=str(lane.repo)
        )
        task = board.add_task(new)
        found = board.claim(built.node, 60, "cli-auto")
        assert found is not None
        assert RunExecutor(built, found).execute().ended == "committed"
        done = board.get_task(task.id)
        assert done.status is Status.DONE and done.result is not None
        assert done.result["summary"] == "done\ufffd with a NUL"
        assert not built.journal.has_pending(BOARD, task.id, found.run.id)
    finally:
        built.close()


ANSWER = {
    "status": "completed",
    "summary": "edited",
    "changed_files": ["edit.txt"],
    "tests_run": [],
    "artifacts": [],
    "findings": [],
    "blockers": [],
}
MESSAGE = {"type": "item.completed", "item": {"id": "i0", "type": "agent_message"}}
FAKE_CODEX = """#!/bin/sh
# codex-shaped, in plain sh (the worker user cannot reach this runner's Python):
# edits the workspace it is given with -C, then answers.
[ "$1" = "--version" ] && { echo "codex-cli 0.171.0 (a test double)"; exit 0; }
cat >/dev/null
while [ $# -gt 0 ]; do
  [ "$1" = "-C" ] && workspace="$2"
  [ "$1" = "-o" ] && last_message="$2"
  shift
done
echo "edited by $(id -un)" > "$workspace/edit.txt" || exit 3
echo '{"type":"thread.started","thread_id":"00000000-0000-0000-0000-000000000001"}'
echo '__MESSAGE__'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'
printf '%s' '__ANSWER__' > "$last_message" || exit 4
""".replace(
    "__MESSAGE__",
    json.dumps({**MESSAGE, "item": {**MESSAGE["item"], "text": json.dumps(ANSWER)}}),
).replace("__ANSWER__", json.dumps(ANSWER))


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
@pytest.mark.parametrize("isolation", ["user", "sandbox"])
def test_with_a_worker_user_the_worktree_is_that_users_and_the_cli_can_edit_it(
    monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """Under ``sandbox`` too the CLI edits its worktree and answers through its result
    file, and the after_done hook runs in the task's sandbox: it cannot write beside the
    worktree. Catches: the executor or the follow-up not sandboxing the hook, or the
    result file's outbox not read (the run would not be committed)."""
    if isolation == "sandbox" and sandbox.unavailable("nobody") is not None:
        pytest.skip(f"no sandbox here: {sandbox.unavailable('nobody')}")
    import pwd
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    worker = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="lane-runner-worker-"))
    try:
        base.chmod(0o755)
        codex = base / "codex"
        codex.write_text(FAKE_CODEX)
        codex.chmod(0o755)
        repo = base / "repo"
        repo.mkdir()
        for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "i"]):
            subprocess.run(
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True
            )
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, worker.pw_uid, worker.pw_gid)
        monkeypatch.setenv("IS_SANDBOX", "1")
        # nobody's home is /nonexistent: codex's home (where the runner writes its rules
        # file, as the worker) must be one the worker can write, as a real codex needs
        codex_home = base / "codex-home"
        codex_home.mkdir()
        os.chown(codex_home, worker.pw_uid, worker.pw_gid)
        monkeypatch.setenv("CODEX_HOME", str(codex_home))
        environ = {
            "LANE_RUNNER_WORKER_USER": "nobody",
            "LANE_RUNNER_CODEX_BIN": str(codex),
            "LANE_RUNNER_HOOKS": '{"*" = {after_done = "id -un > ../after_done.who"}}',
            "LANE_RUNNER_ISOLATION": isolation,
        }
        built = build(config.load(base / "home", environ))
        try:
            board = built.store.create_board(BOARD)
            new = NewTask(title="edit", assignee="cli-codex-low", workspace=str(repo))
            task = board.add_task(new)
            found = board.claim(built.node, 60, "cli-auto")
            assert found is not None
            report = RunExecutor(built, found).execute()
            assert report.ended == "committed", report
            worktree = built.home.worktree(BOARD, task.id)
            edit = worktree / "edit.txt"
            assert edit.read_text() == "edited by nobody\n"
            assert edit.stat().st_uid == worker.pw_uid
            # Its -o file was written beside the worktree (never in the journal) and dropped;
            # what stays is the worktree and the note of the run working in it.
            # The result's commit, and the after_done hook, are the worker user's too.
            branch = repo / ".git" / "refs" / "heads" / "lane" / BOARD / task.id
            assert branch.stat().st_uid == worker.pw_uid
            authors = subprocess.run(
                ["git", "-c", "safe.directory=*", "log", "--format=%an",
                 f"main..{branch.read_text().strip()}"],
                cwd=repo, capture_output=True, text=True, check=True,
            ).stdout.split()
            assert authors == ["lane-runner"]
            if isolation == "user":
                assert (worktree.parent / "after_done.who").read_text() == "nobody\n"
                (worktree.parent / "after_done.who").unlink()
            else:  # the hook ran, in the sandbox, where ../ is not the worktrees' folder
                assert not (worktree.parent / "after_done.who").exists()
                assert not [c for c in board.comments(task.id) if "after_done" in c.body]
            assert sorted(p.name for p in worktree.parent.iterdir()) == [f".{task.id}.run", task.id]
            assert not list(built.home.lane_dir(BOARD).glob("*.provider-*"))
        finally:
            built.close()
    finally:
        shutil.rmtree(base)


def test_a_completed_answer_that_admits_unfinished_work_is_not_done(
    services: Services, lane: Lane
) -> None:
    """The unfinished-work check runs on every answer, not only in goal mode."""
    task = lane.add("claims done", body="[sim:unfinished]", assignee="cli-codex-low")
    report = RunExecutor(services, claim(services, lane)).execute()
    assert report.ended == "block"
    held = lane.board.get_task(task.id)
    assert held.status is Status.BLOCKED and held.block_kind.value == "needs_input"
    assert "unfinished work" in (held.block_reason or "") and held.result is None


def test_only_real_files_in_the_worktree_reach_the_board_as_artifacts(
    services: Services, lane: Lane
) -> None:
    task = lane.add("leaves artifacts", body="[sim:artifacts]", assignee="cli-codex-low")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    done = lane.board.get_task(task.id)
    assert done.result is not None and done.result["artifacts"] == ["sim-output.txt"]


def test_the_worker_prompt_carries_the_operating_rules() -> None:
    from lane_runner.run.context import worker_prompt

    prompt = worker_prompt("# Task")
    for rule in ("inspect", "did not make", "run the tests", "force-push", "hard-reset",
                 "clean untracked", "never call partial work completed"):
        assert rule in prompt, rule


def wait_for_cooldown(lane: Lane, task_id: str) -> None:
    waiting = lane.board.get_task(task_id)
    assert waiting.status is Status.READY and waiting.next_attempt_at is not None
    time.sleep(max(0.0, waiting.next_attempt_at - time.time()) + 0.05)


def test_a_task_cooling_down_again_and_again_is_blocked_with_its_history(
    services: Services, lane: Lane
) -> None:
    """Capacity waits are not failures, but they do not go on forever."""
    services.cfg = services.cfg.replace(cooldown_limit=3)
    lane.set_capacity({"codex": "capacity", "claude": "capacity"})
    task = lane.add("no capacity anywhere")
    for _ in range(2):
        assert RunExecutor(services, claim(services, lane)).execute().ended == "cooldown"
        wait_for_cooldown(lane, task.id)
    assert RunExecutor(services, claim(services, lane)).execute().ended == "block"
    blocked = lane.board.get_task(task.id)
    assert blocked.status is Status.BLOCKED and blocked.block_kind.value == "transient"
    assert "3 times in a row" in (blocked.block_reason or "")
    assert "3 x capacity" in (blocked.block_reason or "") and blocked.failure_count == 0
    state = json.loads((lane.home.lane_dir(BOARD) / f"{task.id}.json").read_text())
    assert state["cooldowns"] == 0  # an unblock gives the task a fresh count


def test_progress_between_cooldowns_restarts_the_count(services: Services, lane: Lane) -> None:
    services.cfg = services.cfg.replace(cooldown_limit=2)
    lane.set_capacity({"codex": "capacity", "claude": "capacity"})
    task = lane.add("capacity comes and goes", body="[sim:crash]")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "cooldown"
    wait_for_cooldown(lane, task.id)
    lane.set_capacity({})
    assert RunExecutor(services, claim(services, lane)).execute().ended == "retry"  # a crash
    lane.set_capacity({"codex": "capacity", "claude": "capacity"})
    assert RunExecutor(services, claim(services, lane)).execute().ended == "cooldown"


class RecordingJudge:
    """The goal judge's seat, taken to see what it is told (the router judge is HTTP)."""

    def __init__(self) -> None:
        self.contexts: list[str] = []

    def judge(self, context: str, result: dict) -> object:
        from lane_runner.router.verdict import Verdict

        self.contexts.append(context)
        return Verdict(True, "looks finished")


def test_a_restarted_goal_carries_on_counting_and_the_judge_sees_the_history(
    services: Services, lane: Lane
) -> None:
    from journal import Document
    from lane_runner.run import lanestate

    judge = RecordingJudge()
    services.judge = judge  # type: ignore[assignment]
    task = lane.add("goal, restarted", goal_turns=5)
    before = lanestate.LaneState(BOARD, task.id, 99, goal_turn=2)
    before.reject("the tests were not run")
    services.journal.write_documents(BOARD, [Document(f"{task.id}.json", before.to_document())])
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    state = json.loads((lane.home.lane_dir(BOARD) / f"{task.id}.json").read_text())
    assert [a["turn"] for a in state["attempts"]] == [3]
    [context] = judge.contexts
    assert "turn 3 of at most 5" in context and "the tests were not run" in context


def test_no_new_goal_turn_with_less_than_the_margin_left(services: Services, lane: Lane) -> None:
    task = lane.add("short run", body="[sim:incomplete]", goal_turns=3, max_runtime=200)
    assert services.cfg.goal_margin == 300
    assert RunExecutor(services, claim(services, lane)).execute().ended == "block"
    blocked = lane.board.get_task(task.id)
    assert "after 1 turn(s), with too little runtime left" in (blocked.block_reason or "")


def test_every_goal_turn_is_routed_again_and_rejections_are_kept(
    services: Services, lane: Lane
) -> None:
    task = lane.add("three turns", body="[sim:goal:3]", goal_turns=3)
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    notes = [c.body for c in lane.board.comments(task.id)]
    assert len([n for n in notes if n.startswith("route: ")]) == 3
    assert any(n.startswith("goal turn 3/3: turn 2 not accepted") for n in notes)
    state = json.loads((lane.home.lane_dir(BOARD) / f"{task.id}.json").read_text())
    assert len(state["goal_rejections"]) == 2 and "remaining work" in state["goal_rejections"][0]


def test_the_board_learns_how_the_result_was_reached(services: Services, lane: Lane) -> None:
    task = lane.add("with metadata", assignee="cli-codex-low")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    [completed] = [e for e in lane.board.events(task.id) if e.kind == "completed"]
    metadata = completed.data["metadata"]
    route = metadata["route"]
    assert (route["provider"], route["effort"]) == ("codex", "low")
    assert route["model"] and route["classifier"] and route["reason"]
    assert metadata["sessions"]["codex"]  # the thread the CLI started
    assert (metadata["goal_turn"], metadata["goal_turns"]) == (1, 1)
    assert metadata["judge"] == {
        "judge": "structural",
        "accepted": True,
        "reason": "completed with a summary, no blockers and no unfinished-work markers",
    }
    assert metadata["changed_files"] == ["sim-output.txt"] and metadata["tests_run"] == []


def test_a_provider_change_at_restart_is_noted(services: Services, lane: Lane) -> None:
    from journal import Document
    from lane_runner.run import lanestate

    task = lane.add("was claude's", assignee="cli-codex-low")
    before = lanestate.LaneState(BOARD, task.id, 99, provider="claude", sessions={"claude": "s"})
    services.journal.write_documents(BOARD, [Document(f"{task.id}.json", before.to_document())])
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    notes = [c.body for c in lane.board.comments(task.id)]
    assert any(
        n.startswith("provider changed at restart: claude -> codex")
        and f"lane/{BOARD}/{task.id}" in n
        for n in notes
    )


def test_a_result_waiting_for_its_board_is_noted(services: Services, lane: Lane) -> None:
    """The commit is refused for now (a board that failed the transaction, not the comment),
    and the runner stops meanwhile: the result waits in the journal, and the task says so."""
    from journal import CommitResult

    def refused(record: object) -> CommitResult:
        services.cancel.set()  # the shutdown's grace is over while the commit waits
        return CommitResult.PENDING

    services.commit = refused  # type: ignore[method-assign]
    task = lane.add("board busy")
    found = claim(services, lane)
    assert RunExecutor(services, found).execute().ended == "pending"
    assert services.journal.has_pending(BOARD, task.id, found.run.id)
    notes = [c.body for c in lane.board.comments(task.id)]
    assert any(f"result of run {found.run.id} waits in the journal" in n for n in notes)


def test_an_ending_the_board_will_not_take_is_tried_until_the_lease_is_lost(
    services: Services, lane: Lane
) -> None:
    """The board refuses the commit again and again while the lease holds; once another
    runner's rescue has the run, the executor stops trying and leaves the result pending."""
    from journal import CommitResult

    tries = []

    def refused(record: object) -> CommitResult:
        tries.append(record)
        if len(tries) == 3:  # the lease ran out meanwhile and a rescue took the run
            lane.board.reclaim(found.run.id, "lease expired", Outcome.EXPIRED)
        return CommitResult.PENDING

    services.commit = refused  # type: ignore[method-assign]
    task = lane.add("board refusing")
    found = claim(services, lane)
    assert RunExecutor(services, found).execute().ended == "pending"
    assert len(tries) >= 3
    assert services.journal.has_pending(BOARD, task.id, found.run.id)


def test_a_long_attempt_leaves_progress_notes(services: Services, lane: Lane) -> None:
    services.cfg = services.cfg.replace(progress_note_interval=0.3)
    task = lane.add("slow", body="[sim:slow:0.5:4]", assignee="cli-codex-low")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    notes = [c.body for c in lane.board.comments(task.id) if c.body.startswith("still working")]
    assert notes and "codex/" in notes[0]
    assert "turn" not in notes[0]  # a task of one turn is not told in goal turns


def test_without_progress_notes_configured_none_are_written(
    services: Services, lane: Lane
) -> None:
    services.cfg = services.cfg.replace(progress_note_interval=0)
    task = lane.add("slow", body="[sim:slow:0.5:2]", assignee="cli-codex-low")
    assert RunExecutor(services, claim(services, lane)).execute().ended == "committed"
    assert not [c for c in lane.board.comments(task.id) if c.body.startswith("still working")]


def test_a_worker_inherits_what_worker_env_names_and_nothing_else(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    codex = tmp_path / "codex"
    codex.write_text(
        FAKE_CODEX.replace(
            'echo "edited by $(id -un)"', 'echo "proxy=$MY_PROXY secret=$MY_SECRET"'
        )
    )
    codex.chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "i"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True
        )
    monkeypatch.setenv("MY_PROXY", "http://proxy:3128")
    monkeypatch.setenv("MY_SECRET", "hunter2")
    environ = {"LANE_RUNNER_CODEX_BIN": str(codex), "LANE_RUNNER_WORKER_ENV": "MY_PROXY"}
    built = build(config.load(tmp_path / "home", environ))
    try:
        board = built.store.create_board(BOARD)
        task = board.add_task(NewTask(title="env", assignee="cli-codex-low", workspace=str(repo)))
        found = board.claim(built.node, 60, "cli-auto")
        assert found is not None
        assert RunExecutor(built, found).execute().ended == "committed"
        edit = built.home.worktree(BOARD, task.id) / "edit.txt"
        assert edit.read_text() == "proxy=http://proxy:3128 secret=\n"
    finally:
        built.close()


def test_a_board_read_that_fails_mid_run_hands_the_run_back(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task's comments cannot be read for its context (the board's wait budget ran out):
    the run goes back to ready, uncounted, instead of staying claimed until its lease ends."""
    from lane_runner.board.base import BoardUnavailable

    def unreadable(*args: object, **kwargs: object) -> None:
        raise BoardUnavailable("board 'work' is unavailable: database is locked")

    task = lane.add("context unreadable")
    found = claim(services, lane)
    monkeypatch.setattr(services.store.board(BOARD), "comments", unreadable)
    assert RunExecutor(services, found).execute().ended == "cooldown"
    run = lane.runs(task.id)[0]
    assert run.outcome is Outcome.RECLAIMED and "database is locked" in (run.reason or "")
    assert lane.board.get_task(task.id).status is Status.READY
    assert lane.board.get_task(task.id).failure_count == 0
