"""Real claude, not logged in, inside the executor: auth, provider health, fallback to codex."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from lane_runner import config
from lane_runner.board.model import NewTask, Status
from lane_runner.router import health
from lane_runner.run.executor import RunExecutor
from lane_runner.service.services import build
from tests.daemon.test_executor import FAKE_CODEX

from .conftest import Scratch, cli_path


def test_not_logged_in_marks_claude_unavailable_and_codex_finishes(scratch: Scratch) -> None:
    # The CLI where only root may write: the runner refuses one its worker could replace.
    bindir = Path(tempfile.mkdtemp(prefix="lane-contract-bin-"))
    bindir.chmod(0o755)
    codex = bindir / "codex"
    codex.write_bytes(FAKE_CODEX.encode())
    codex.chmod(0o755)
    repo = scratch.path("repo")
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "i"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                       check=True, capture_output=True)
    for path in [repo, *repo.rglob("*")]:
        os.chown(path, scratch.worker.uid, scratch.worker.gid)
    environ = {"LANE_RUNNER_CLAUDE_BIN": str(cli_path("claude")),
               "LANE_RUNNER_CODEX_BIN": str(codex)}
    if scratch.worker.name:
        environ["LANE_RUNNER_WORKER_USER"] = scratch.worker.name
    services = build(config.load(scratch.root / "runner-home", environ))
    try:
        board = services.store.create_board("work")
        task = board.add_task(NewTask(title="hello", assignee="cli-claude-low",
                                      workspace=str(repo)))
        found = board.claim(services.node, 60, "cli-auto")
        assert found is not None
        report = RunExecutor(services, found).execute()
        assert (report.ended, report.provider) == ("committed", "codex"), report
        done = board.get_task(task.id)
        assert done.status is Status.DONE and done.failure_count == 0
        claude_health = json.loads(
            health.health_file(services.home.provider_health, "claude").read_text())
        assert claude_health["state"] == "unavailable"
        assert claude_health["authenticated"] is False
        assert "Not logged in" in claude_health["reason"]
    finally:
        services.close()
        shutil.rmtree(bindir)
