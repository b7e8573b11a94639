"""Argv for every path, accepted by the simulators (the real CLIs: tests/contract)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lane_runner.providers import claude
from lane_runner.providers.simulators import claude as claude_sim
from lane_runner.providers.simulators import codex as codex_sim
from schemas import load

from .conftest import RequestFactory, claude_argv, codex_argv

THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"
SESSION = "3f0b6f1e-1d2c-4a8e-9f00-5a5a5a5a5a5a"


def test_codex_new_thread(make_request: RequestFactory, tmp_path: Path) -> None:
    req = make_request("codex")
    argv = codex_argv(req, None)
    assert argv == [
        str(req.executable), "--dangerously-bypass-approvals-and-sandbox",
        "--dangerously-bypass-hook-trust", "exec", "--json",
        "-m", "gpt-5.5", "-c", 'model_reasoning_effort="high"',
        "--output-schema", str(req.schema_path), "-o", str(req.result_file),
        "-C", str(req.workspace), "-",
    ]


def test_codex_resume(make_request: RequestFactory) -> None:
    req = make_request("codex")
    argv = codex_argv(req, THREAD)
    assert argv[1:5] == ["--dangerously-bypass-approvals-and-sandbox",
                         "--dangerously-bypass-hook-trust", "exec", "resume"]
    assert argv[-2:] == [THREAD, "-"]
    assert "-C" not in argv
    assert argv[argv.index("-o") + 1] == str(req.result_file)


@pytest.mark.parametrize("resume", [False, True])
def test_claude_argv(make_request: RequestFactory, resume: bool) -> None:
    req = make_request("claude", session_id=SESSION)
    argv = claude_argv(req, SESSION, resume, '{"type":"object"}')
    assert argv[:6] == [str(req.executable), "-p", "--output-format", "stream-json",
                        "--verbose", "--json-schema"]
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert argv[argv.index("--effort") + 1] == "high"
    assert "--dangerously-skip-permissions" in argv
    assert argv[argv.index("--autocompact") + 1] == "auto"
    assert argv[argv.index("--settings") + 1] == str(req.settings_path)
    denied = argv[argv.index("--disallowedTools") + 1 : -2]
    assert "Bash(git push --force *)" in denied and "Bash(git reset --hard *)" in denied
    assert any(rule.startswith("Bash(git clean -f") for rule in denied)
    assert argv[-2:] == ["--resume" if resume else "--session-id", SESSION]


def test_simulators_parse_our_argv(make_request: RequestFactory) -> None:
    req = make_request("codex")
    for thread in (None, THREAD):
        parsed = codex_sim.parse(codex_argv(req, thread)[1:])
        assert parsed.resume is (thread is not None)
        assert parsed.options["output"] == [str(req.result_file)]
    parsed_claude = claude_sim.parse(
        claude_argv(req, SESSION, False, "{}")[1:])
    assert parsed_claude.options["session_id"] == SESSION
    assert parsed_claude.options["settings"] == str(req.settings_path)
    assert len(parsed_claude.denied) == len(claude.DENIED_TOOLS)


def _run_sim(cli: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"lane_runner.providers.simulators.{cli}", *args],
                          input="", capture_output=True, text=True, timeout=30)


def test_simulators_reject_unknown_options_like_the_real_parsers() -> None:
    codex_run = _run_sim("codex", ["exec", "--json", "--bogus"])
    assert codex_run.returncode == 2
    assert codex_run.stderr.startswith("error: unexpected argument '--bogus' found")
    resume_run = _run_sim("codex", ["exec", "resume", "-C", "/tmp", THREAD])
    assert resume_run.returncode == 2 and "'-C'" in resume_run.stderr
    claude_run = _run_sim("claude", ["-p", "--bogus"])
    assert claude_run.returncode == 1
    assert claude_run.stderr.strip() == "error: unknown option '--bogus'"
    no_verbose = _run_sim("claude", ["-p", "--output-format", "stream-json"])
    assert "requires --verbose" in no_verbose.stderr


def test_claude_simulator_refuses_a_2020_12_schema_like_the_real_cli() -> None:
    """Claude Code 2.1.332 knows only draft-07; the simulator plays its refusal."""
    validation = json.dumps(load("worker-result.schema.json"))
    refused = _run_sim("claude", ["-p", "--json-schema", validation])
    assert refused.returncode == 1
    assert 'no schema with key or ref "https://json-schema.org/draft/2020-12/schema"' in (
        refused.stderr)
    missing = _run_sim("claude", ["-p", "--settings", "no-such-settings.json"])
    assert "Settings file not found: no-such-settings.json" in missing.stderr
