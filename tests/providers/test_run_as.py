"""Workers run as the configured unprivileged user when the runner is root."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
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


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the unprivileged user can enter (pytest's own tmp dirs are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="lane-runner-run-as-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_the_cli_runs_as_the_worker_user(make_request: RequestFactory, shared_dir: Path) -> None:
    user = pwd.getpwnam("nobody")
    answer = json.dumps({**RESULT, "summary": "uid UID"})
    script = shared_dir / "codex"
    script.write_text(FAKE_CODEX.replace("__RESULT__", answer))
    script.chmod(0o755)
    workspace = shared_dir / "workspace"
    workspace.mkdir(mode=0o777)
    attempt = run_attempt(make_request(
        "codex", executable=script, workspace=workspace, run_as="nobody",
        result_file=shared_dir / "unused.result.json",
    ))
    assert attempt.classification is Classification.OK, attempt.reason
    assert attempt.structured is not None
    assert attempt.structured["summary"] == f"uid {user.pw_uid}"
