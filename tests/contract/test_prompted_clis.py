"""The runner against the real, pinned opencode and Gemini CLI, offline (issue 43).

Offline and without accounts each still shows what the runner depends on: it parses
every argv the runner builds (each effort, fresh and resumed), refuses an unknown
session in words the adapter turns into a fresh start, and fails in the ways the
classifier must recognise: gemini's "Please set an Auth method" (auth), its refusal of
a gateway without the API-key auth selected, opencode's unknown model. The versions are
held by ``test_real_clis.test_the_cli_versions_are_the_pinned_ones_when_ci_says_so``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from lane_runner.names import EFFORTS
from lane_runner.providers import Classification, run_attempt

from .conftest import RequestFactory, Scratch

#: What opencode and gemini print when the runner's own invocation is wrong (yargs).
USAGE_ERRORS = ("opencode run [message..]", "Unknown argument", "Not enough arguments",
                "Invalid values")


def _said(attempt_log: Path) -> str:
    return attempt_log.read_text(errors="replace")


def _no_usage_error(text: str) -> None:
    assert not [marker for marker in USAGE_ERRORS if marker in text], text[-3000:]


@pytest.mark.parametrize("effort", EFFORTS)
def test_opencode_takes_every_argv_of_the_runner(real_request: RequestFactory,
                                                 effort: str) -> None:
    """New and resumed, each effort: parsed, then its refusal of a model no provider of its
    has (misconfigured, the operator's to fix). The resume of a session it never saw
    ("Session not found") starts afresh, and the fresh session is the one reported."""
    for session in (None, "ses_0000000000000000000unknown"):
        seen: list[str] = []
        req = real_request("opencode", model="lane-contract:none", effort=effort,
                           session_id=session, resume=session is not None,
                           on_session=seen.append)
        attempt = run_attempt(req)
        assert attempt.classification is Classification.MISCONFIGURED, (attempt.reason,
                                                                         attempt.tail)
        assert "Model not found: lane-contract/none" in attempt.reason
        assert attempt.argv[attempt.argv.index("-m") + 1] == "lane-contract/none"
        assert "--session" not in attempt.argv, "the unknown session was replaced"
        assert attempt.session_id and attempt.session_id != session
        assert seen and seen[-1] == attempt.session_id
        _no_usage_error(_said(req.log_path))
    assert "Session not found" in _said(req.log_path)


@pytest.mark.parametrize("effort", EFFORTS)
def test_gemini_takes_every_argv_and_says_it_is_not_logged_in(
    real_request: RequestFactory, effort: str
) -> None:
    """New and resumed, each effort: parsed, then "Please set an Auth method" (auth). A
    resume of a session it never saw starts that reserved id fresh."""
    for resume in (False, True):
        req = real_request("gemini", model="gemini-2.5-pro", effort=effort, resume=resume,
                           session_id=str(uuid.uuid4()))
        attempt = run_attempt(req)
        assert attempt.classification is Classification.AUTH, (attempt.reason, attempt.tail)
        assert "Please set an Auth method" in attempt.reason
        assert attempt.session_id == req.session_id
        assert attempt.argv[-2:] == ["--session-id", req.session_id]
        _no_usage_error(_said(req.log_path))
    assert "No previous sessions found" in _said(req.log_path)


def test_gemini_at_a_gateway_without_the_api_key_auth_is_refused_as_doctor_says(
    real_request: RequestFactory, scratch: Scratch
) -> None:
    """``GOOGLE_GEMINI_BASE_URL`` alone makes gemini 0.61 pick an auth type its headless
    mode refuses: the adapter's gateway check says so before any task is spent."""
    from lane_runner.providers import adapter

    env = {**real_request("gemini").env, "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
           "GEMINI_API_KEY": "dummy"}
    assert adapter("gemini").gateway({}, env)[1], "the check must see the refusal coming"
    attempt = run_attempt(real_request("gemini", env=env, session_id=str(uuid.uuid4())))
    assert attempt.classification is Classification.MISCONFIGURED, (attempt.reason,
                                                                     attempt.tail)
    assert "Invalid auth method selected" in attempt.reason


def _doctor(scratch: Scratch, **env: str) -> dict[str, dict[str, object]]:
    """``lane-runner doctor --json`` with the real opencode and gemini, as the worker."""
    import os
    import subprocess
    import sys

    import orjson

    from .conftest import cli_path

    home = scratch.path("home", directory=True)
    lines = [f'opencode_bin = "{cli_path("opencode")}"', f'gemini_bin = "{cli_path("gemini")}"']
    if scratch.worker.name:
        lines.append(f'worker_user = "{scratch.worker.name}"')
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lane-runner")), "--home", str(home), "doctor",
         "--json"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch.root), **env},
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return {str(check["name"]): check for check in orjson.loads(done.stdout)["checks"]}


def test_doctor_checks_each_login_as_the_worker_user(scratch: Scratch) -> None:
    """Not logged in: each fails and says how to log in as the worker; a key that reaches
    the workers passes (``opencode auth list`` sees it in its environment)."""
    checks = _doctor(scratch)
    opencode, gemini = checks["opencode login"], checks["gemini login"]
    assert (opencode["level"], gemini["level"]) == ("fail", "fail"), (opencode, gemini)
    login_as = f"sudo -u {scratch.worker.name} -H " if scratch.worker.name else ""
    assert f"{login_as}opencode auth login" in str(opencode["fix"])
    assert f"{login_as}gemini" in str(gemini["fix"]) and "GEMINI_API_KEY" in str(gemini["fix"])
    checks = _doctor(scratch, GEMINI_API_KEY="dummy", OPENCODE_CONFIG_CONTENT=(
        '{"provider": {"gateway": {"npm": "@ai-sdk/openai-compatible"}}}'))
    assert checks["gemini login"]["level"] == "pass", checks["gemini login"]
    assert checks["opencode login"]["level"] == "pass", checks["opencode login"]
