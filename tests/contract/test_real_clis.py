"""The runner against the real, pinned CLIs, offline (see conftest.py for the set-up).

Offline, a real CLI still shows what the runner depends on: it parses every argv
the runner builds, takes the wire schema without a word, reads a large prompt from
stdin, and fails in the ways the classifier must recognise: claude's "Not logged
in", codex's endless reconnect, an unknown session on resume, the root refusal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lane_runner.names import EFFORTS
from lane_runner.providers import Classification, run_attempt

from .conftest import RequestFactory, Scratch, cli_path

#: What the CLIs print when the runner's own invocation is wrong.
USAGE_ERRORS = ("unexpected argument", "unknown option", "argument missing",
                "is not a valid JSON Schema", "strict mode", "Unknown --effort value",
                "Settings file not found", "Usage:")


def _said(attempt_log: Path) -> str:
    return attempt_log.read_text(errors="replace")


def _no_usage_error(text: str) -> None:
    assert not [marker for marker in USAGE_ERRORS if marker in text], text[-3000:]


@pytest.mark.parametrize("effort", EFFORTS)
def test_claude_takes_every_argv_of_the_runner(real_request: RequestFactory, effort: str) -> None:
    """New and resumed, each effort: parsed, schema taken, then "Not logged in" (auth).

    The resume of a session this CLI never saw also shows the fallback to a fresh
    start with the same reserved id.
    """
    for resume in (False, True):
        req = real_request("claude", effort=effort, resume=resume)
        attempt = run_attempt(req)
        assert attempt.classification is Classification.AUTH, (attempt.reason, attempt.tail)
        assert attempt.reason == "Not logged in · Please run /login"
        assert attempt.session_id == req.session_id
        assert attempt.argv[attempt.argv.index("--effort") + 1] == effort
        assert attempt.argv[attempt.argv.index("--autocompact") + 1] == "auto"
        assert attempt.argv[attempt.argv.index("--settings") + 1] == str(req.settings_path)
        assert "--session-id" in attempt.argv  # a resume of an unknown id started fresh
        _no_usage_error(_said(req.log_path))
    assert "No conversation found with session ID" in _said(req.log_path)


@pytest.mark.parametrize("effort", EFFORTS)
def test_codex_takes_every_argv_and_its_spent_reconnects_end_the_attempt(
    real_request: RequestFactory, scratch: Scratch, effort: str
) -> None:
    """Codex offline reconnects five times, then waits for the network for ever: that
    word ends the attempt as an authentication failure, not the stall clock.

    A resume of an unknown thread ("no rollout found") starts a new thread.
    """
    for thread in (None, "0199a213-81c0-7800-8aa1-bbab2a035a53"):
        seen: list[str] = []
        req = real_request("codex", effort=effort, session_id=thread, resume=thread is not None,
                           on_session=seen.append)
        attempt = run_attempt(req)
        assert attempt.classification is Classification.AUTH, (attempt.reason, attempt.tail)
        assert "waiting for network" in attempt.reason
        assert attempt.session_id and attempt.session_id != thread and seen == [attempt.session_id]
        assert attempt.argv[:3] == [str(req.executable),
                                    "--dangerously-bypass-approvals-and-sandbox",
                                    "--dangerously-bypass-hook-trust"]
        _no_usage_error(_said(req.log_path))
        rollouts = list(scratch.root.glob(f"home/.codex/sessions/**/*{attempt.session_id}.jsonl"))
        assert rollouts, "codex recorded no thread for the attempt"
        assert f'"effort":"{effort}"' in rollouts[0].read_text()
    assert "no rollout found for thread id" in _said(req.log_path)


def _big_prompt(marker: str) -> str:
    line = "Keep every line of this prompt: it checks that stdin carries all of it.\n"
    return line * (300 * 1024 // len(line) + 1) + marker


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_300_kib_prompt_arrives_whole_on_stdin(
    real_request: RequestFactory, scratch: Scratch, provider: str
) -> None:
    """The CLI records the prompt it read; its last line, past 300 KiB, is there."""
    marker = f"END-OF-PROMPT-{scratch.mark}"
    req = real_request(provider, prompt=_big_prompt(marker))
    assert len(req.prompt.encode()) > 300 * 1024
    attempt = run_attempt(req)
    # codex: its reconnects spent; claude: not logged in
    assert attempt.classification is Classification.AUTH, (attempt.reason, attempt.tail)
    recorded = [path for path in scratch.root.glob("home/**/*.jsonl")
                if marker in path.read_text(errors="replace")]
    assert recorded, f"{provider} recorded no prompt ending in the marker"


def claude_schema_problems(real_request: RequestFactory, schema: Path) -> list[str]:
    """What real claude says about ``schema`` as ``--json-schema``: nothing, when taken."""
    attempt = run_attempt(real_request("claude", schema_path=schema))
    said = attempt.reason + "\n" + attempt.tail
    problems = [line for line in said.splitlines()
                if "schema" in line.lower() or "strict mode" in line]
    if attempt.classification is not Classification.AUTH:
        problems.append(f"{attempt.classification}: {attempt.reason}")
    return problems


def test_claude_takes_the_wire_schema_without_a_word(real_request: RequestFactory,
                                                     scratch: Scratch) -> None:
    wire = scratch.root / "worker-result.wire.json"
    assert claude_schema_problems(real_request, wire) == []


def test_planting_the_old_schema_fails_the_contract(real_request: RequestFactory,
                                                    scratch: Scratch) -> None:
    """The validation schema (2020-12, if/then) is what every claude run was refused for."""
    from schemas import load, load_bytes

    old = scratch.file("old.json", load_bytes("worker-result.schema.json"))
    problems = claude_schema_problems(real_request, old)
    assert "misconfigured: Error: --json-schema is not a valid JSON Schema" in problems[-1]
    assert any('no schema with key or ref "https://json-schema.org/draft/2020-12/schema"' in p
               for p in problems), problems
    plain = {k: v for k, v in load("worker-result.schema.json").items()
             if k not in ("$schema", "$id")}
    without_meta = scratch.file("old-no-meta.json", json.dumps(plain).encode())
    problems = claude_schema_problems(real_request, without_meta)
    assert any('strict mode: missing type "array" for keyword "maxItems"' in p
               for p in problems), problems


def test_claude_as_root_is_refused_and_the_refusal_classified(
    real_request: RequestFactory,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the root refusal shows only as root")
    env = {k: v for k, v in real_request("claude").env.items()
           if k not in ("IS_SANDBOX", "CLAUDE_CODE_BUBBLEWRAP")}
    attempt = run_attempt(real_request("claude", run_as=None, env=env))
    assert "cannot be used with root/sudo privileges" in attempt.reason
    assert attempt.classification is Classification.MISCONFIGURED


def test_the_cli_versions_are_the_pinned_ones_when_ci_says_so() -> None:
    """``LANE_CONTRACT_VERSIONS`` (set by .ci/run) names what the suite was meant to hold."""
    import subprocess

    wanted = os.environ.get("LANE_CONTRACT_VERSIONS")
    if not wanted:
        pytest.skip("LANE_CONTRACT_VERSIONS not set: the suite runs against whatever is given")
    for pair in wanted.split(","):
        provider, _, version = pair.partition("=")
        done = subprocess.run([str(cli_path(provider)), "--version"], capture_output=True,
                              text=True, timeout=60)
        assert version in done.stdout, (provider, done.stdout, done.stderr)
