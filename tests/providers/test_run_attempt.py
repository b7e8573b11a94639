"""run_attempt end to end through the simulated CLIs: results, sessions, fallbacks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lane_runner.providers import Classification, run_attempt

from .conftest import RequestFactory


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_success_edits_the_workspace_and_reports_the_session(
    make_request: RequestFactory, provider: str
) -> None:
    seen: list[str] = []
    req = make_request(provider, on_session=seen.append)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason
    assert attempt.structured and attempt.structured["changed_files"] == ["sim-output.txt"]
    assert (req.workspace / "sim-output.txt").read_text().startswith("turn 1: Fix the bug")
    assert attempt.session_id and seen == [attempt.session_id]
    assert "lane-runner: starting" in req.log_path.read_text()
    if provider == "codex":
        assert json.loads(req.result_file.read_text()) == attempt.structured


def test_codex_resume_continues_the_thread(make_request: RequestFactory) -> None:
    first = run_attempt(make_request("codex", prompt="[sim:goal:2] build it"))
    assert first.structured and first.structured["status"] == "incomplete"
    assert "TODO: remaining" in first.structured["summary"]
    second = run_attempt(make_request("codex", prompt="[sim:goal:2] build it",
                                      session_id=first.session_id, resume=True))
    assert second.structured and second.structured["status"] == "completed"
    assert second.session_id == first.session_id
    assert second.argv[4] == "resume"


def test_codex_unknown_thread_starts_a_fresh_one(make_request: RequestFactory) -> None:
    seen: list[str] = []
    stale = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    req = make_request("codex", session_id=stale, resume=True, on_session=seen.append)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason
    assert attempt.session_id not in (None, stale) and seen == [attempt.session_id]
    assert attempt.result_file is not None and attempt.result_file != req.result_file
    assert not req.result_file.exists()
    assert "no rollout found for thread id" in req.log_path.read_text()


def test_claude_fresh_start_of_a_used_id_resumes(make_request: RequestFactory) -> None:
    first = run_attempt(make_request("claude"))
    again = make_request("claude", session_id=first.session_id, resume=False)
    attempt = run_attempt(again)
    assert attempt.classification is Classification.OK, attempt.reason
    assert "--resume" in attempt.argv and attempt.session_id == first.session_id
    assert "already in use" in again.log_path.read_text()


def test_claude_resume_of_a_missing_session_starts_it_fresh(make_request: RequestFactory) -> None:
    req = make_request("claude", resume=True)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason
    assert "--session-id" in attempt.argv and attempt.session_id == req.session_id


@pytest.mark.parametrize("provider", ["codex", "claude"])
@pytest.mark.parametrize(("scenario", "expected"), [
    ("capacity", Classification.CAPACITY),
    ("auth", Classification.AUTH),
    ("crash", Classification.FAILED),
])
def test_failure_scenarios(make_request: RequestFactory, provider: str, scenario: str,
                           expected: Classification) -> None:
    attempt = run_attempt(make_request(provider, prompt=f"[sim:{scenario}] fix login"))
    assert attempt.classification is expected, attempt.reason


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_blocked_and_garbage(make_request: RequestFactory, provider: str) -> None:
    blocked = run_attempt(make_request(provider, prompt="[sim:blocked] x"))
    assert blocked.structured and blocked.structured["blockers"]
    garbage = run_attempt(make_request(provider, prompt="[sim:garbage] x"))
    assert garbage.classification is Classification.OK, garbage.reason


def test_capacity_is_controlled_from_outside(make_request: RequestFactory, tmp_path: Path) -> None:
    control = tmp_path / "control.json"
    control.write_text(json.dumps({"codex": "capacity", "claude": "capacity"}))
    def env(provider: str) -> dict[str, str]:
        return {**make_request(provider).env, "LANE_RUNNER_SIM_CONTROL": str(control)}
    for provider in ("codex", "claude"):
        out = run_attempt(make_request(provider, env=env(provider)))
        assert out.classification is Classification.CAPACITY
    control.write_text(json.dumps({}))
    back = run_attempt(make_request("claude", env=env("claude")))
    assert back.classification is Classification.OK


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_300_kib_prompt_travels_on_stdin(make_request: RequestFactory, provider: str) -> None:
    prompt = "Large task\n" + ("lorem ipsum dolor sit amet " * 12000)
    assert len(prompt.encode()) > 300 * 1024
    attempt = run_attempt(make_request(provider, prompt=prompt))
    assert attempt.classification is Classification.OK, attempt.reason
    assert all(len(arg) < 10_000 for arg in attempt.argv)


@pytest.mark.skipif(os.geteuid() != 0, reason="the claude root guard only fires as root")
def test_root_guard_refuses_like_the_real_claude_without_a_declared_sandbox(
    make_request: RequestFactory,
) -> None:
    request = make_request("claude")
    request.env.pop("IS_SANDBOX")
    attempt = run_attempt(request)
    assert attempt.classification is Classification.MISCONFIGURED
    assert "root/sudo" in attempt.reason


def test_a_provider_qualified_marker_applies_to_that_provider_only(
    make_request: RequestFactory,
) -> None:
    prompt = "Speed it up [sim@codex:capacity]"
    assert run_attempt(make_request("codex", prompt)).classification is Classification.CAPACITY
    assert run_attempt(make_request("claude", prompt)).classification is Classification.OK


def test_a_crash_is_told_by_its_panic_line_not_the_note_after_it(
    make_request: RequestFactory,
) -> None:
    """The simulated codex crashes as Rust does: the panic, its message, then a note."""
    attempt = run_attempt(make_request("codex", prompt="[sim:crash] x"))
    assert attempt.classification is Classification.FAILED
    assert attempt.reason == (
        "exit status 101: thread 'main' panicked at core/src/codex.rs:412:9: simulated crash"
    )
