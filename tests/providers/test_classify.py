"""Every classification, from streams shaped exactly like docs/ARCHITECTURE.md §7
(real CLI output)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lane_runner.providers import Classification, claude, codex
from lane_runner.providers.classify import gave_up
from lane_runner.providers.model import Attempt
from lane_runner.providers.reading import Reading
from lane_runner.providers.run import conclude
from lane_runner.providers.supervisor import Ended

CODEX = codex.ADAPTER
CLAUDE = claude.ADAPTER

RESULT = {"status": "completed", "summary": "done", "changed_files": ["a.py"], "tests_run": [],
          "artifacts": [], "findings": [], "blockers": []}
SESSION = "3f0b6f1e-1d2c-4a8e-9f00-5a5a5a5a5a5a"


def judge(provider: str, lines: list[str], *, status: int | None = 0, stderr: str = "",
          signal: int | None = None, stopped: Classification | None = None,
          file_answer: dict[str, Any] | None = None) -> Attempt:
    reading = Reading()
    observe = CODEX.observe if provider == "codex" else CLAUDE.observe
    for line in lines:
        observe(reading, json.loads(line))
    ended = Ended(exit_status=status, signal=signal, stopped=stopped,
                  stop_reason="stopped" if stopped else "", stderr=stderr, tail="", pid=1)
    return conclude(reading, ended, file_answer)


def codex_ok(text: str) -> list[str]:
    return [
        '{"type":"thread.started","thread_id":"01a22a8f-ded7-70c1-86b9-89eb6ad1a1b4"}',
        '{"type":"turn.started"}',
        json.dumps({"type": "item.completed",
                    "item": {"id": "item_1", "type": "agent_message", "text": text}}),
        '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}',
    ]


def test_codex_success_from_agent_message() -> None:
    attempt = judge("codex", codex_ok(json.dumps(RESULT)))
    assert attempt.classification is Classification.OK
    assert attempt.structured == RESULT
    assert attempt.session_id == "01a22a8f-ded7-70c1-86b9-89eb6ad1a1b4"


def test_codex_result_file_wins_over_agent_message() -> None:
    other = {**RESULT, "summary": "from the -o file"}
    attempt = judge("codex", codex_ok(json.dumps(RESULT)), file_answer=other)
    assert attempt.structured == other


def test_codex_fenced_result_text_is_found() -> None:
    attempt = judge("codex", codex_ok("Here it is:\n```json\n" + json.dumps(RESULT) + "\n```"))
    assert attempt.classification is Classification.OK


def test_schema_invalid_result_is_a_failure() -> None:
    attempt = judge("codex", codex_ok(json.dumps({**RESULT, "blockers": ["x"]})))
    assert attempt.classification is Classification.FAILED
    assert "invalid worker result" in attempt.reason and attempt.structured is None


def test_prose_about_authentication_is_not_auth() -> None:
    text = ("I fixed the authentication bug: 401 Unauthorized responses and the expired token "
            "refresh; also handled 429 rate limit and 'Not logged in' pages.")
    lines = [*codex_ok(text)[:2], codex_ok(text)[2]]
    attempt = judge("codex", lines, status=1, stderr="")
    assert attempt.classification is Classification.FAILED


def test_codex_usage_limit_is_capacity() -> None:
    message = "You've hit your usage limit. Upgrade to Pro or try again at 3:05 PM."
    lines = [codex_ok("")[0], '{"type":"turn.started"}',
             json.dumps({"type": "error", "message": message}),
             json.dumps({"type": "turn.failed", "error": {"message": message}})]
    assert judge("codex", lines, status=1).classification is Classification.CAPACITY


def test_codex_retry_limit_429_is_capacity() -> None:
    noise = [json.dumps({"type": "error", "message": f"Reconnecting... {n}/5 (429 Too Many)"})
             for n in range(1, 6)]
    final = "exceeded retry limit, last status: 429 Too Many Requests"
    lines = [codex_ok("")[0], *noise, json.dumps({"type": "turn.failed",
                                                  "error": {"message": final}})]
    attempt = judge("codex", lines, status=1)
    assert attempt.classification is Classification.CAPACITY
    assert "exceeded retry limit" in attempt.reason


def test_codex_unauthorized_is_auth() -> None:
    message = "unexpected status 401 Unauthorized: Missing bearer or basic authentication"
    lines = [codex_ok("")[0], json.dumps({"type": "error", "message": message})]
    assert judge("codex", lines, status=1).classification is Classification.AUTH


def test_codex_unknown_thread_is_session_missing() -> None:
    stderr = ("Error: thread/resume: thread/resume failed: no rollout found for thread id "
              "0199a213-81c0-7800-8aa1-bbab2a035a53 (code -32600)\n\nStack backtrace:\n"
              "   0: <unknown>")
    assert judge("codex", [], status=1, stderr=stderr).classification is (
        Classification.SESSION_MISSING)


def test_codex_success_despite_earlier_reconnects() -> None:
    noise = json.dumps({"type": "error", "message": "Reconnecting... 1/5 (429)"})
    lines = codex_ok(json.dumps(RESULT))
    attempt = judge("codex", [lines[0], noise, *lines[1:]])
    assert attempt.classification is Classification.OK


def test_reconnect_events_are_not_meaningful_but_items_are() -> None:
    reading = Reading()
    assert not CODEX.observe(reading, {"type": "error", "message": "Reconnecting... 2/5 (x)"})
    assert CODEX.observe(reading, {"type": "item.started", "item": {"type": "reasoning"}})
    assert not CLAUDE.observe(reading, {"type": "system", "subtype": "api_retry", "attempt": 1})
    assert CLAUDE.observe(reading, {"type": "assistant", "message": {}})


def test_codex_gives_up_once_its_reconnects_are_spent_not_before() -> None:
    """The real stream (tests/providers/fixtures/real-cli/codex-reconnect.stdout): n/5 is
    chatter; "waiting for network" is codex's last word, an authentication failure."""
    reading = Reading()
    for n in range(1, 6):
        CODEX.observe(reading, {"type": "error", "message": f"Reconnecting... {n}/5 (dns)"})
        assert gave_up(reading.signals) is None
    CODEX.observe(reading, {"type": "error", "message":
                            "Reconnecting... waiting for network (Connection failed)"})
    verdict = gave_up(reading.signals)
    assert verdict is not None and verdict[0] is Classification.AUTH
    assert verdict[1].endswith("Reconnecting... waiting for network (Connection failed)")
    CODEX.observe(reading, {"type": "turn.completed"})
    assert gave_up(reading.signals) is not None  # turn events are no error: the last word stands


CLAUDE_NOT_LOGGED_IN = [
    json.dumps({"type": "system", "subtype": "init", "cwd": "/w", "session_id": SESSION}),
    json.dumps({"type": "assistant", "message": {"content": [
        {"type": "text", "text": "Not logged in · Please run /login"}]},
        "session_id": SESSION, "error": "authentication_failed"}),
    json.dumps({"type": "result", "subtype": "success", "is_error": True, "num_turns": 1,
                "result": "Not logged in · Please run /login", "session_id": SESSION}),
]


def test_claude_not_logged_in_is_auth_even_with_subtype_success() -> None:
    attempt = judge("claude", CLAUDE_NOT_LOGGED_IN, status=1)
    assert attempt.classification is Classification.AUTH
    assert "Not logged in" in attempt.reason


def test_claude_is_error_wins_even_with_exit_zero_and_a_result() -> None:
    lines = [CLAUDE_NOT_LOGGED_IN[0], json.dumps({
        "type": "result", "subtype": "success", "is_error": True,
        "result": "Invalid API key · Please run /login", "structured_output": RESULT})]
    assert judge("claude", lines, status=0).classification is Classification.AUTH


@pytest.mark.parametrize("text", [
    "You've hit your session limit · resets 3pm (Europe/Berlin)",
    "Claude AI usage limit reached|1760000000",
    "API Error: Request rejected (429) · this may be a temporary capacity issue",
    'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
])
def test_claude_limits_are_capacity(text: str) -> None:
    lines = [CLAUDE_NOT_LOGGED_IN[0], json.dumps({"type": "result", "subtype": "success",
                                                  "is_error": True, "result": text})]
    assert judge("claude", lines, status=1).classification is Classification.CAPACITY


def test_claude_success_uses_structured_output_then_result_text() -> None:
    structured = [CLAUDE_NOT_LOGGED_IN[0], json.dumps({
        "type": "result", "subtype": "success", "is_error": False, "result": "prose",
        "structured_output": RESULT})]
    assert judge("claude", structured).structured == RESULT
    text_only = [CLAUDE_NOT_LOGGED_IN[0], json.dumps({
        "type": "result", "subtype": "success", "is_error": False, "result": json.dumps(RESULT)})]
    attempt = judge("claude", text_only)
    assert attempt.classification is Classification.OK and attempt.session_id == SESSION


def test_claude_unknown_session_is_session_missing() -> None:
    lines = [json.dumps({"type": "result", "subtype": "error_during_execution", "is_error": True,
                         "num_turns": 0, "session_id": SESSION,
                         "errors": [f"No conversation found with session ID: {SESSION}"]})]
    attempt = judge("claude", lines, status=1,
                    stderr=f"No conversation found with session ID: {SESSION}")
    assert attempt.classification is Classification.SESSION_MISSING


def test_claude_session_in_use_is_collision() -> None:
    stderr = f"Error: Session ID {SESSION} is already in use."
    attempt = judge("claude", [], status=1, stderr=stderr)
    assert attempt.classification is Classification.SESSION_COLLISION


def test_claude_root_refusal_is_a_misconfiguration() -> None:
    stderr = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security"
    attempt = judge("claude", [], status=1, stderr=stderr)
    assert attempt.classification is Classification.MISCONFIGURED
    assert "root/sudo" in attempt.reason


@pytest.mark.parametrize(
    "stderr",
    [
        "error: unexpected argument '--bogus' found\n\nUsage: codex exec [OPTIONS] [PROMPT]",
        "error: a value is required for '--model <MODEL>' but none was supplied",
        "error: invalid value 'x' for '--sandbox <SANDBOX_MODE>'",
        "error: unknown option '--bogus'",
        "error: option '--model <model>' argument missing",
        "Error: --json-schema is not a valid JSON Schema: no schema with key or ref \"x\"",
        "Error: --json-schema is not valid JSON: JSON Parse error: Expected '}'",
        "Error: Settings file not found: /etc/x.json",
    ],
)
def test_a_refused_invocation_is_a_misconfiguration(stderr: str) -> None:
    attempt = judge("codex", [], status=2, stderr=stderr)
    assert attempt.classification is Classification.MISCONFIGURED
    assert attempt.reason == stderr.splitlines()[0]


def test_a_strict_mode_warning_is_not_a_refusal() -> None:
    """Claude warns and goes on; what ended the run (here the login) is the verdict."""
    stderr = 'strict mode: missing type "array" for keyword "maxItems" at "#/then" (strictTypes)'
    lines = [json.dumps({"type": "result", "subtype": "success", "is_error": True,
                         "result": "Not logged in · Please run /login"})]
    assert judge("claude", lines, status=1, stderr=stderr).classification is Classification.AUTH


def test_killed_by_signal_and_plain_failures() -> None:
    assert judge("codex", [], status=None, signal=9).classification is (
        Classification.KILLED_BY_SIGNAL)
    crash = judge("codex", [], status=101, stderr="thread 'main' panicked at x.rs\nboom")
    assert crash.classification is Classification.FAILED and "boom" in crash.reason
    node = judge("claude", [], status=1, stderr=(
        "Error: Cannot find module 'x'\n    at Module._resolve (node:internal:1)\nNode.js v22"))
    assert node.reason == "exit status 1: Error: Cannot find module 'x'"
    python = judge("codex", [], status=1, stderr="Traceback:\n  File x\nValueError: bad")
    assert python.reason == "exit status 1: ValueError: bad"
    silent = judge("codex", codex_ok("no json here"))
    assert silent.classification is Classification.FAILED


@pytest.mark.parametrize("stopped", [Classification.STALLED, Classification.TIMED_OUT,
                                     Classification.LEASE_LOST, Classification.CANCELLED])
def test_supervisor_stops_win_and_drop_the_result(stopped: Classification) -> None:
    attempt = judge("codex", codex_ok(json.dumps(RESULT)), status=None, signal=15,
                    stopped=stopped)
    assert attempt.classification is stopped and attempt.structured is None


def test_claude_root_refusal_up_front() -> None:
    assert "worker_user" in (CLAUDE.root_refusal(None, euid=0, environ={}) or "")
    assert CLAUDE.root_refusal("worker", euid=0, environ={}) is None
    assert CLAUDE.root_refusal(None, euid=1000, environ={}) is None


@pytest.mark.parametrize("declared", [{"IS_SANDBOX": "1"}, {"CLAUDE_CODE_BUBBLEWRAP": "1"}])
def test_a_declared_sandbox_lifts_the_root_refusal(declared: dict[str, str]) -> None:
    assert CLAUDE.root_refusal(None, euid=0, environ=declared) is None
    assert CLAUDE.root_refusal(None, euid=0, environ={"IS_SANDBOX": "0"}) is not None


# The vocabulary the CLIs use when an account or service has nothing left (credits, quota,
# exhausted, capacity): another provider or a wait helps, so it is capacity, not a failure.
@pytest.mark.parametrize("text", [
    "Credit balance is too low",
    "Your credit balance is too low to access the Anthropic API.",
    "API Error: 400 You have run out of credits",
    "Quota exceeded. Check your plan and billing details.",
    "Resource has been exhausted (e.g. check quota).",
    "Selected model is at capacity. Please try a different model.",
])
def test_claude_credit_quota_and_capacity_texts_are_capacity(text: str) -> None:
    lines = [CLAUDE_NOT_LOGGED_IN[0], json.dumps({"type": "result", "subtype": "success",
                                                  "is_error": True, "result": text})]
    assert judge("claude", lines, status=1).classification is Classification.CAPACITY


@pytest.mark.parametrize(("message", "expected"), [
    ("You exceeded your current quota, please check your plan and billing details.",
     Classification.CAPACITY),
    ("Selected model is at capacity. Please try a different model.", Classification.CAPACITY),
    ("stream disconnected: your credits are exhausted", Classification.CAPACITY),
    ("unexpected status 401: authentication failed", Classification.AUTH),
    ("Authentication failed: refresh the login with `codex login`", Classification.AUTH),
])
def test_codex_capacity_and_authentication_texts(message: str, expected: Classification) -> None:
    lines = [codex_ok("")[0], '{"type":"turn.started"}',
             json.dumps({"type": "error", "message": message}),
             json.dumps({"type": "turn.failed", "error": {"message": message}})]
    assert judge("codex", lines, status=1).classification is expected


@pytest.mark.parametrize(
    "said",
    ["API Error: 401 {\"error\": \"unauthorized for this rate limit window\"}",
     "unexpected status 401: quota window closed, please log in again"],
)
def test_an_auth_failure_that_also_names_a_limit_is_auth(said: str) -> None:
    """Auth is checked before capacity (``ORDER``): a logged-out CLI whose 401 mentions a
    rate limit window must ask a person (needs_input), not wait and retry every 5 minutes
    as for capacity. Catches CAPACITY checked before AUTH."""
    from lane_runner.providers.classify import Signals, classify_failure

    for signals in (Signals(errors=[said]), Signals(stderr=said)):
        assert classify_failure(signals)[0] is Classification.AUTH
