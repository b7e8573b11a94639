"""What the real CLIs said offline (fixtures/real-cli, captured from the pinned versions,
see tests/contract), read by the adapters and classified as the runner must."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lane_runner.providers import Classification, claude, codex
from lane_runner.providers.reading import Reading
from lane_runner.providers.run import conclude
from lane_runner.providers.supervisor import Ended

FIXTURES = Path(__file__).parent / "fixtures" / "real-cli"


def replay(name: str, stopped: Classification | None = None) -> tuple[Reading, list[bool]]:
    """Feed one captured run to its adapter; also what each event counted as (progress)."""
    observe = (codex.ADAPTER if name.startswith("codex") else claude.ADAPTER).observe
    reading = Reading()
    progress = [observe(reading, json.loads(line))
                for line in (FIXTURES / f"{name}.stdout").read_text().splitlines() if line]
    return reading, progress


def verdict(name: str, stopped: Classification | None = None) -> tuple[Classification, str]:
    reading, _ = replay(name)
    status = int((FIXTURES / f"{name}.status").read_text())
    ended = Ended(exit_status=status, signal=None, stopped=stopped,
                  stop_reason="stopped" if stopped else "",
                  stderr=(FIXTURES / f"{name}.stderr").read_text(), tail="", pid=1)
    attempt = conclude(reading, ended, None)
    return attempt.classification, attempt.reason


@pytest.mark.parametrize(
    ("name", "classification", "reason"),
    [
        ("claude-not-logged-in", Classification.AUTH, "Not logged in · Please run /login"),
        ("claude-resume-unknown", Classification.SESSION_MISSING,
         "No conversation found with session ID: 154be38c-a783-439a-8e9b-d790ba406982"),
        ("claude-root-refusal", Classification.MISCONFIGURED,
         "--dangerously-skip-permissions cannot be used with root/sudo privileges for security "
         "reasons"),
        ("claude-old-schema", Classification.MISCONFIGURED,
         'Error: --json-schema is not a valid JSON Schema: no schema with key or ref '
         '"https://json-schema.org/draft/2020-12/schema"'),
        ("claude-unknown-option", Classification.MISCONFIGURED, "error: unknown option '--bogus'"),
        ("claude-argument-missing", Classification.MISCONFIGURED,
         "error: option '--model <model>' argument missing"),
        ("codex-unknown-option", Classification.MISCONFIGURED,
         "error: unexpected argument '--bogus' found"),
        ("codex-value-required", Classification.MISCONFIGURED,
         "error: a value is required for '--model <MODEL>' but none was supplied"),
        ("codex-resume-unknown", Classification.SESSION_MISSING,
         "Error: thread/resume: thread/resume failed: no rollout found for thread id "
         "0199a213-81c0-7800-8aa1-bbab2a035a53 (code -32600)"),
        # Against the scripted model server (tests/realrun): the API's failures
        ("codex-high-demand", Classification.CAPACITY,
         "We’re currently experiencing high demand, which may cause temporary errors."),
        ("claude-server-error", Classification.CAPACITY,
         "API Error: 500 Internal server error. This is a server-side issue, usually temporary "
         "— try again in a moment. If it persists, check your inference gateway "
         "(127.0.0.1:18090)."),
        ("codex-context-window", Classification.REFUSED,
         "Codex ran out of room in the model's context window. Start a new thread or clear "
         "earlier history before retrying."),
        ("claude-prompt-too-long", Classification.REFUSED,
         "Prompt is too long · the request is ~250000 tokens (limit 200000) but this "
         "conversation is only ~2589 tokens — the rest is system prompt, tool definitions, "
         "and attachment content. A single-exchange conversation cannot be compacted; reduce "
         "attached files/tools or start with less context."),
        # ... and a gateway configured wrong: the operator's to fix, not the task's
        ("codex-missing-env-key", Classification.MISCONFIGURED,
         "Missing environment variable: `CORP_LLM_KEY`."),
        ("codex-provider-not-found", Classification.MISCONFIGURED,
         "Error: Model provider `y` not found"),
        ("codex-wire-api-chat", Classification.MISCONFIGURED,
         'Error loading config.toml: `wire_api = "chat"` is no longer supported.'),
        ("codex-model-missing", Classification.MISCONFIGURED,
         "The model `gpt-5.5` does not exist or you do not have access to it."),
        ("claude-model-missing", Classification.MISCONFIGURED,
         "There's an issue with the selected model (claude-sonnet-4-5). It may not exist or "
         "you may not have access to it. Run --model to pick a different model."),
        ("claude-no-structured-output", Classification.FAILED, claude.NO_STRUCTURED_OUTPUT),
    ],
)
def test_each_real_output_is_classified(name: str, classification: Classification,
                                        reason: str) -> None:
    assert verdict(name) == (classification, reason)


def test_codex_offline_makes_no_progress_after_its_turn_starts() -> None:
    """Reconnect errors and transport-warning items are not progress: the stall clock
    runs from ``turn.started`` and ends the run (the supervisor's stop wins)."""
    reading, progress = replay("codex-reconnect")
    started = [json.loads(line)["type"] for line in
               (FIXTURES / "codex-reconnect.stdout").read_text().splitlines()].index("turn.started")
    assert progress[started] is True and not any(progress[started + 1:])
    assert reading.session_id == "01a22ea4-3bba-7f21-b2e2-60631d20440a"
    assert verdict("codex-reconnect", stopped=Classification.STALLED)[0] is (
        Classification.STALLED)


def test_claude_names_its_session_before_it_fails() -> None:
    reading, _ = replay("claude-not-logged-in")
    assert reading.session_id is not None and reading.finished
