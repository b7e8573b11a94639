"""Real opencode and Gemini CLI through the daemon, against the scripted model server
(issue 43): opencode through a custom OpenAI-compatible provider at the server
(``opencode_env``'s ``OPENCODE_CONFIG_CONTENT``), gemini through ``GOOGLE_GEMINI_BASE_URL``
(``gemini_env``, with the API-key auth selected in the worker's gemini settings). A task
on each lane is done exactly once by the real binary, fails over to another provider on
its quota words uncounted, and resumes its session after ``kill -9``."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from lane_runner.board.model import Outcome, Status

from .conftest import ModelServer, RealLane, answer, marker
from .test_work import assert_committed_once

pytestmark = pytest.mark.timeout(600)

PROVIDERS = ["opencode", "gemini"]


@pytest.fixture(autouse=True)
def every_cli(real_lane: RealLane) -> None:
    """All four real CLIs installed: opencode falls back to gemini, gemini to codex."""
    real_lane.install("opencode", "gemini")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_cli_runs_a_tool_that_changes_the_worktree_and_answers(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    name = marker(f"work-{provider}")
    model_server.script(name, **{provider: [
        {"shell": "echo made by a tool > made.txt"},
        {"answer": answer("made made.txt", ["made.txt"])},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    completed = assert_committed_once(real_lane, task.id, "made.txt")
    worktree = real_lane.home.worktree("work", task.id)
    assert (worktree / "made.txt").read_text() == "made by a tool\n"
    sent = model_server.requests(name, provider)
    key = ({"authorization": "Bearer scripted-opencode-key"} if provider == "opencode"
           else {"x-goog-api-key": "scripted-gemini-key"})  # opencode_env's, gemini_env's
    assert all(key.items() <= r["headers"].items() for r in sent), sent[0]["headers"]
    session = completed["metadata"]["sessions"][provider]  # type: ignore[index]
    if provider == "opencode":
        assert session == sent[-1]["session"], "the board's session is the one the server saw"
    assert '"status"' in json.dumps(sent[0]["body"]), "the prompt asks for the schema"
    assert real_lane.live_workers() == []


#: Each CLI's spent quota as its API says it (OpenAI's ``insufficient_quota``, Google's
#: ``RESOURCE_EXHAUSTED`` with a per-day quota and its wait).
QUOTA: dict[str, dict[str, Any]] = {
    "opencode": {"status": 429, "body": {"error": {
        "message": "You exceeded your current quota, please check your plan and billing "
                   "details.", "type": "insufficient_quota", "code": "insufficient_quota"}}},
    "gemini": {"status": 429, "body": {"error": {
        "code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "You exceeded your current quota. Please retry in 3h2m1s.",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "10921s"},
        ]}}},
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_spent_quota_fails_over_to_another_provider_uncounted(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """opencode retries a spent quota for ever, saying so only in a log line: the adapter
    reads it and the task moves on at once; gemini ends with its TerminalQuotaError. The
    next provider finishes the task; no failure is counted against it."""
    name = marker(f"quota-{provider}")
    done = [{"shell": "echo by another > other.txt"},
            {"answer": answer("made other.txt", ["other.txt"])}]
    model_server.script(name, **{provider: [{"error": QUOTA[provider]}],
                                 **{other: done for other in ("codex", "claude", "opencode",
                                                              "gemini") if other != provider}})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    assert_committed_once(real_lane, task.id, "other.txt")
    assert real_lane.board.get_task(task.id).failure_count == 0
    attempts = real_lane.lane_state(task.id)["attempts"]
    first, *rest = [(a["provider"], a["classification"]) for a in attempts]
    assert first == (provider, "capacity"), attempts
    assert rest and rest[-1][0] != provider and rest[-1][1] == "ok", attempts
    assert "then silent" not in attempts[0]["reason"], "its quota words ended it, not a stall"


def calls(request: dict[str, Any], provider: str) -> list[str]:
    """The tool calls in the conversation a request carries (its history)."""
    body = request["body"]
    if provider == "opencode":
        return [call["function"]["arguments"] for message in body.get("messages") or []
                for call in message.get("tool_calls") or []]
    return [json.dumps(part["functionCall"]) for content in body.get("contents") or []
            for part in content.get("parts") or [] if "functionCall" in part]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kill_9_between_two_tool_calls_then_the_same_session_resumes(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The daemon dies while the model is asked for the second tool call; the restarted
    daemon ends the orphaned CLI and resumes its session (``--session`` / ``-r``): the
    server sees the first tool call replayed, and the task is done once."""
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
    session = real_lane.lane_state(task.id)["sessions"][provider]
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    completed = assert_committed_once(real_lane, task.id, "one.txt", "two.txt")
    assert real_lane.board.get_run(first_run).outcome is Outcome.RECLAIMED
    assert real_lane.board.get_task(task.id).failure_count == 0
    sent = model_server.requests(name, provider)
    before = next(r for r in sent if r["turn"] == 1 and r["attempt"] == 0)
    after = next(r for r in sent if r["turn"] == 1 and r["attempt"] == 1)
    assert calls(before, provider) and calls(after, provider)[:1] == calls(
        before, provider)[:1], "the resumed session replays the first tool call"
    assert completed["metadata"]["sessions"][provider] == session  # type: ignore[index]
    resumed = f"--session {session}" if provider == "opencode" else f"-r {session}"
    assert resumed in real_lane.task_log(task.id)
    assert real_lane.board.get_task(task.id).status is Status.DONE


#: What each real CLI tells its model when the deny list refuses a command.
REFUSED = {"opencode": "prevents you from using this specific tool call",
           "gemini": "Tool execution denied by policy. lane-runner denies this command"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_real_cli_refuses_a_denied_command(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The deny list reaches each CLI in its own words (opencode: ``OPENCODE_PERMISSION``
    set for each start; gemini: the policy file written in its home) and the real binary
    refuses ``git reset --hard`` before it runs, telling the model why."""
    name = marker(f"deny-{provider}")
    real_lane.commit_file("kept.txt", "kept\n")
    model_server.script(name, **{provider: [
        {"shell": "echo changed > kept.txt && git reset --hard"},
        {"answer": answer("tried a hard reset", ["kept.txt"])},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    told = json.dumps(model_server.requests(name, provider)[-1]["body"])
    assert REFUSED[provider] in told, told[-2000:]
    worktree = real_lane.home.worktree("work", task.id)
    assert (worktree / "kept.txt").read_text() == "kept\n", "nothing of the command ran"
