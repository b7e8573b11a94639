"""The trust posture's argv and files, taken by the real, pinned codex (docs/security.md):
each ``codex_sandbox`` mode is parsed by ``exec`` and ``exec resume``, and the rules file
the runner writes is read by codex's own execpolicy as forbidding every denied command.
(The real runs, tests/realrun/test_posture.py, show both at work.)"""

from __future__ import annotations

import json
import subprocess

import pytest

from lane_runner.providers import Classification, codex, denied, run_attempt

from .conftest import RequestFactory, Scratch, cli_path
from .test_real_clis import _no_usage_error, _said

THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_codex_takes_each_sandbox_mode_new_and_resumed(
    real_request: RequestFactory, mode: str
) -> None:
    """Parsed (no usage error), then offline: its reconnects spent, as with the bypass."""
    for thread in (None, THREAD):
        req = real_request("codex", sandbox=mode, session_id=thread, resume=thread is not None)
        attempt = run_attempt(req)
        assert attempt.classification is Classification.AUTH, (attempt.reason, attempt.tail)
        assert "--dangerously-bypass-approvals-and-sandbox" not in attempt.argv
        assert f'sandbox_mode="{mode}"' in attempt.argv
        _no_usage_error(_said(req.log_path))


def _decision(rules: str, command: list[str]) -> str | None:
    done = subprocess.run(
        [str(cli_path("codex")), "execpolicy", "check", "--rules", rules, *command],
        capture_output=True, text=True, timeout=60, check=True,
    )
    decision: str | None = json.loads(done.stdout).get("decision")
    return decision


def test_codex_reads_the_runners_rules_as_forbidding_every_denied_command(
    real_request: RequestFactory, scratch: Scratch
) -> None:
    """The file an attempt leaves in the worker's codex home, as codex itself judges it:
    each denied prefix, with or without more words, is forbidden; git's other commands
    are left to codex's posture."""
    req = real_request("codex")
    run_attempt(req)
    rules = str(codex.rules_file(req.env))
    for command in denied.DENIED_COMMANDS:
        assert _decision(rules, list(command)) == "forbidden", command
        assert _decision(rules, [*command, "origin", "main"]) == "forbidden", command
    for allowed in (["git", "push", "origin", "main"], ["git", "reset", "--soft", "HEAD~1"],
                    ["git", "status"]):
        assert _decision(rules, allowed) is None, allowed
