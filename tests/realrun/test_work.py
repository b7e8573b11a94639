"""The real CLIs finish whole tasks through the daemon: tools run, answers committed once,
sessions resumed after a ``kill -9`` (see conftest.py for the set-up)."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from lane_runner.board.model import Outcome, Status
from lane_runner.run import workspace
from tests.harness import BOARD, hold_commit

from .conftest import ModelServer, RealLane, answer, marker

pytestmark = pytest.mark.timeout(600)


def completions(lane: RealLane, task_id: str) -> list[dict[str, object]]:
    return [e.data for e in lane.board.events(task_id) if e.kind in ("completed", "replayed")]


def git_says(lane: RealLane, *args: str) -> str:
    """git in the worker user's repository, read as the test's user."""
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(lane.repo), *args],
                          capture_output=True, text=True, check=True).stdout


def branch_commits(lane: RealLane, task_id: str) -> list[str]:
    """The commits the task's branch added to main, newest first."""
    span = f"main..{workspace.branch_name(BOARD, task_id)}"
    return git_says(lane, "log", "--format=%H", span).split()


def committed_files(lane: RealLane, task_id: str) -> list[str]:
    span = f"main..{workspace.branch_name(BOARD, task_id)}"
    return sorted(set(git_says(lane, "log", "--name-only", "--format=", span).split()))


def assert_committed_once(lane: RealLane, task_id: str, *changed: str) -> dict[str, object]:
    """Done by one run, one completion on the board, the files in one commit on the task's
    branch (the runner's), and nothing left uncommitted in its worktree."""
    task = lane.board.get_task(task_id)
    assert task.status is Status.DONE, (task, lane.task_log(task_id)[-3000:])
    completed = [run for run in lane.runs(task_id) if run.outcome is Outcome.COMPLETED]
    assert [run.id for run in completed] == [task.completed_run_id]
    assert len(completions(lane, task_id)) == 1
    assert task.result is not None and task.result["changed_files"] == list(changed)
    [commit] = branch_commits(lane, task_id)
    assert set(changed) <= set(committed_files(lane, task_id))
    worktree = lane.home.worktree(BOARD, task_id)
    status = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(worktree), "status",
                             "--porcelain"],
                            capture_output=True, text=True, check=False).stdout
    assert status == "", status
    delivered = completions(lane, task_id)[0]["metadata"]["delivery"]  # type: ignore[index]
    assert delivered["commit"] == commit  # type: ignore[index]
    return completions(lane, task_id)[0]


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_each_cli_runs_a_tool_that_changes_the_worktree_and_answers(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    name = marker(f"work-{provider}")
    steps = [{"shell": "echo made by a tool > made.txt"}]
    if provider == "claude":
        steps.append({"write": {"path": "written.txt", "content": "written by Write\n"}})
    steps.append({"answer": answer("made made.txt", ["made.txt"])})
    model_server.script(name, **{provider: steps})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    completed = assert_committed_once(real_lane, task.id, "made.txt")
    worktree = real_lane.home.worktree(BOARD, task.id)
    assert (worktree / "made.txt").read_text() == "made by a tool\n"
    if provider == "claude":
        assert (worktree / "written.txt").read_text() == "written by Write\n"
    sent = model_server.requests(name, provider)
    key = ({"authorization": "Bearer scripted-codex-key"} if provider == "codex"
           else {"x-api-key": "scripted-claude-key"})  # codex_env's, and the daemon's own
    assert all(key.items() <= r["headers"].items() for r in sent), sent[0]["headers"]
    session = completed["metadata"]["sessions"][provider]  # type: ignore[index]
    assert session == sent[-1]["session"], "the board's session is the one the server saw"
    assert real_lane.live_workers() == []


def tool_calls(request: dict[str, object], provider: str) -> list[str]:
    """The ids of the tool calls in the conversation a request carries (its history)."""
    body = request["body"]
    assert isinstance(body, dict)
    if provider == "codex":
        return [item["call_id"] for item in body.get("input") or []
                if item.get("type") == "function_call"]
    return [block["id"] for message in body.get("messages") or []
            if message.get("role") == "assistant" and isinstance(message.get("content"), list)
            for block in message["content"] if block.get("type") == "tool_use"]


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_kill_9_between_two_tool_calls_then_the_same_session_resumes(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The daemon dies while the model is asked for its second tool call; the restarted
    daemon ends the orphaned CLI, and the real ``exec resume`` / ``--resume`` carries the
    conversation on: the server sees the first tool call replayed in the same session."""
    name = marker(f"resume-{provider}")
    model_server.script(name, **{provider: [
        {"shell": "echo one > one.txt"},
        {"attempts": [{"hang": True}, {"shell": "echo two > two.txt"}]},
        {"answer": answer("made one.txt and two.txt", ["one.txt", "two.txt"])},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    daemon = real_lane.start()
    real_lane.wait_for(lambda: any(r["turn"] == 1 for r in model_server.requests(name)),
                       120, "the CLI to ask for its second tool call")
    first_run = real_lane.board.get_task(task.id).current_run_id
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    completed = assert_committed_once(real_lane, task.id, "one.txt", "two.txt")
    assert real_lane.board.get_run(first_run).outcome is Outcome.RECLAIMED
    assert real_lane.board.get_task(task.id).failure_count == 0
    sent = model_server.requests(name, provider)
    before = next(r for r in sent if r["turn"] == 1 and r["attempt"] == 0)
    after = next(r for r in sent if r["turn"] == 1 and r["attempt"] == 1)
    assert tool_calls(before, provider) and tool_calls(after, provider)[:1] == tool_calls(
        before, provider)[:1], "the resumed session replays the first tool call"
    assert before["session"] == after["session"]
    assert completed["metadata"]["sessions"][provider] == after["session"]  # type: ignore[index]
    resumed = "exec resume" if provider == "codex" else "--resume"
    assert resumed in real_lane.task_log(task.id)
    assert (real_lane.home.worktree(BOARD, task.id) / "two.txt").read_text() == "two\n"


#: A repository hook that keeps claude alive after its answer (as issue 26 found).
LINGERING_HOOK = {"hooks": {"SessionEnd": [{"hooks": [
    {"type": "command", "command": "sleep 600", "timeout": 600}]}]}}


def test_a_cli_that_answers_and_lingers_keeps_its_answer(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """Real claude prints its ``result`` with the answer, then its SessionEnd hook keeps it
    alive: the answer is committed, nobody redoes the work, the lingering tree is ended."""
    real_lane.write_config(stall_timeout=15.0)
    real_lane.commit_file(".claude/settings.json", json.dumps(LINGERING_HOOK))
    name = marker("linger")
    model_server.script(
        name,
        claude=[{"shell": "echo kept > kept.txt"},
                {"answer": answer("made kept.txt", ["kept.txt"])}],
        codex=[{"answer": answer("redone by codex", ["kept.txt"])}],
    )
    task = real_lane.add(name, assignee="cli-claude-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    done = real_lane.board.get_task(task.id)
    assert done.status is Status.DONE and done.summary == "made kept.txt", real_lane.task_log(
        task.id)[-3000:]
    assert model_server.requests(name, "codex") == [], "nobody redid the work"
    assert real_lane.live_workers() == []


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_kill_9_between_the_commit_and_the_pending_record_leaves_one_commit(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The daemon is SIGKILLed while the runner's commit of a real CLI's work exists and
    before the journal's pending record does (a test's hold on the runner's commit keeps
    it there). Restarted, it finishes the task with exactly that commit, asking nobody
    to redo the work."""
    assert real_lane.scratch is not None
    held = real_lane.scratch.path("commit-held")
    release = real_lane.scratch.path("commit-release")
    real_lane.extra_env.update(hold_commit(held, release))
    name = marker(f"deliver-{provider}")
    model_server.script(name, **{provider: [
        {"shell": "echo delivered > delivered.txt"},
        {"answer": answer("made delivered.txt", ["delivered.txt"])},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    daemon = real_lane.start()
    real_lane.wait_for(held.exists, 240, "the runner's commit")
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    release.touch()
    # Made in the task's clone; the repository gets it once the runner publishes it.
    span = f"main..{workspace.branch_name(BOARD, task.id)}"
    [made] = subprocess.run(
        ["git", "-c", "safe.directory=*", "log", "--format=%H", span],
        cwd=real_lane.home.worktree(BOARD, task.id), capture_output=True, text=True, check=True,
    ).stdout.split()
    assert branch_commits(real_lane, task.id) == []
    assert list(real_lane.home.lane_dir(BOARD).glob("*.terminal.*")) == []
    asked = len(model_server.requests(name, provider))
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    assert_committed_once(real_lane, task.id, "delivered.txt")
    assert branch_commits(real_lane, task.id) == [made]
    assert len(model_server.requests(name, provider)) == asked, "nobody redid the work"


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_cli_that_commits_by_itself_is_respected_and_no_change_is_a_result(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """A real CLI whose tool commits its own work: that commit is the result, the runner
    adds an empty one that carries the accepted result. Another that changes nothing:
    done, with only that empty commit."""
    # The worker user's view; an agent's own commit in its sandbox is
    # tests/realrun/test_sandbox.py's.
    real_lane.write_config(isolation="user")
    commits, idle = marker(f"self-commit-{provider}"), marker(f"no-change-{provider}")
    model_server.script(commits, **{provider: [
        {"shell": "echo mine > mine.txt && git add mine.txt && "
                  "git -c user.name=worker -c user.email=w@localhost commit -qm 'by the worker'"},
        {"answer": answer("committed mine.txt", ["mine.txt"])},
    ]})
    model_server.script(idle, **{provider: [{"answer": answer("nothing needed changing")}]})
    first = real_lane.add(commits, assignee=f"cli-{provider}-low")
    second = real_lane.add(idle, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    for task in (first, second):
        assert real_lane.board.get_task(task.id).status is Status.DONE, real_lane.task_log(
            task.id)[-3000:]
    carrier, own = branch_commits(real_lane, first.id)
    assert git_says(real_lane, "log", "-1", "--format=%s", own).strip() == "by the worker"
    assert git_says(real_lane, "show", "--name-only", "--format=", carrier).strip() == ""
    delivered = completions(real_lane, first.id)[0]["metadata"]["delivery"]  # type: ignore[index]
    assert delivered["commit"] == carrier  # type: ignore[index]
    assert delivered["commits"] == [own, carrier]  # type: ignore[index]
    [empty] = branch_commits(real_lane, second.id)
    assert git_says(real_lane, "show", "--name-only", "--format=", empty).strip() == ""


#: A build that prints nothing: one CPU busy for nine seconds (under codex's 10 s yield).
SILENT_BUILD = (
    'python3 -c "import time; end = time.monotonic() + 9; '
    '[0 for _ in iter(lambda: time.monotonic() < end, False)]"'
)


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_real_cli_running_a_silent_tool_past_the_stall_timeout_survives(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The real CLI prints nothing while its tool works for three stall timeouts; the tool
    clock is held to the stall limit, so only the CPU the attempt's cgroup uses keeps the
    attempt alive (issue 32)."""
    real_lane.write_config(stall_timeout=3.0, tool_stall_timeout=3.0, busy_cpu_percent=10.0)
    name = marker(f"silent-{provider}")
    steps = [{"shell": SILENT_BUILD}, {"answer": answer("built quietly")}]
    model_server.script(name, **{provider: steps})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    done = real_lane.board.get_task(task.id)
    assert done.status is Status.DONE, real_lane.task_log(task.id)[-3000:]
    attempts = real_lane.lane_state(task.id)["attempts"]
    assert [(a["provider"], a["classification"]) for a in attempts] == [(provider, "ok")]
    assert "its processes are using CPU: still working" in real_lane.task_log(task.id)


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_real_cli_waiting_on_a_tool_runs_on_the_tool_clock(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """A tool that waits without CPU (a download, a lock) for twice the stall timeout: the
    real CLI's tool call is in flight (codex's command_execution item started, claude's
    tool_use unanswered), so ``tool_stall_timeout`` applies; the CPU clock is off. The stall
    timeout leaves room for the CLI's own start and model calls on a loaded machine (4 s
    once ran out before claude's tool call began); the tool waits two and a half of them."""
    real_lane.write_config(stall_timeout=10.0, tool_stall_timeout=3600.0, busy_cpu_percent=0.0)
    name = marker(f"waiting-{provider}")
    steps = [{"shell": "sleep 25"}, {"answer": answer("waited")}]
    model_server.script(name, **{provider: steps})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    done = real_lane.board.get_task(task.id)
    assert done.status is Status.DONE, real_lane.task_log(task.id)[-3000:]
    attempts = real_lane.lane_state(task.id)["attempts"]
    assert [(a["provider"], a["classification"]) for a in attempts] == [(provider, "ok")]
