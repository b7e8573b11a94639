"""Workers run as the configured unprivileged user when the runner is root."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from lane_runner.providers import Classification, run_attempt

from .conftest import RequestFactory

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

RESULT = {"status": "completed", "changed_files": [], "tests_run": [], "artifacts": [],
          "findings": [], "blockers": []}

# A codex-shaped CLI in plain sh, so the unprivileged user needs no Python of ours.
FAKE_CODEX = """#!/bin/sh
cat >/dev/null
uid=$(id -u)
echo '{"type":"thread.started","thread_id":"00000000-0000-0000-0000-000000000001"}'
printf '{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":%s}}\\n' \\
  "$(printf '%s' '__RESULT__' | sed "s/UID/$uid/" | sed 's/"/\\\\"/g; s/^/"/; s/$/"/')"
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'
"""


def test_the_cli_runs_as_the_worker_user(make_request: RequestFactory, shared_dir: Path) -> None:
    user = pwd.getpwnam("nobody")
    answer = json.dumps({**RESULT, "summary": "uid UID"})
    script = shared_dir / "codex"
    script.write_text(FAKE_CODEX.replace("__RESULT__", answer))
    script.chmod(0o755)
    workspace = shared_dir / "workspace"
    workspace.mkdir(mode=0o777)
    worker_home = shared_dir / "worker-home"
    worker_home.mkdir()
    worker_home.chmod(0o777)
    req = make_request(
        "codex", executable=script, workspace=workspace, run_as="nobody",
        result_file=shared_dir / "unused.result.json",
    )
    req.env["CODEX_HOME"] = str(worker_home / ".codex")
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason
    # codex's home is the worker's: the runner's rules file, and the directories it
    # made for it, belong to the worker user, not to root
    rules = worker_home / ".codex" / "rules" / "lane-runner.rules"
    assert rules.stat().st_uid == rules.parent.stat().st_uid == rules.parent.parent.stat().st_uid
    assert rules.stat().st_uid == user.pw_uid
    assert (rules.stat().st_mode & 0o777, rules.parent.stat().st_mode & 0o777) == (0o644, 0o700)
    assert attempt.structured is not None
    assert attempt.structured["summary"] == f"uid {user.pw_uid}"
