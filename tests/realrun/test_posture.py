"""The agents' trust posture with the real CLIs (docs/security.md): the runner's deny
list stops a destructive git command in each CLI, codex's rules under its default
bypass included, and ``codex_sandbox = "workspace-write"`` keeps codex's commands'
writes inside the worktree."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from lane_runner.board.model import Status
from tests.harness import BOARD

from .conftest import ModelServer, RealLane, answer, marker

pytestmark = pytest.mark.timeout(600)


#: How each CLI tells its model that the command was denied.
REFUSALS = {
    "codex": "rejected: lane-runner denies this command",  # the rules file's justification
    "claude": "Permission to use Bash with command git clean -fdx has been denied",
}


def tool_outputs(request: dict[str, object], provider: str) -> list[str]:
    """What the tools said back to the model, in the conversation a request carries."""
    body = request["body"]
    assert isinstance(body, dict)
    if provider == "codex":
        return [str(item.get("output")) for item in body.get("input") or []
                if item.get("type") == "function_call_output"]
    return [json.dumps(block.get("content")) for message in body.get("messages") or []
            if message.get("role") == "user" and isinstance(message.get("content"), list)
            for block in message["content"] if block.get("type") == "tool_result"]


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_denied_git_command_is_refused_and_the_work_survives(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """The model makes a file, then asks for ``git clean -fdx`` (which would delete it,
    untracked as it is): the CLI refuses the command, the file is committed."""
    name = marker(f"deny-{provider}")
    model_server.script(name, **{provider: [
        {"shell": "echo precious > precious.txt"},
        {"shell": "git clean -fdx"},
        {"answer": answer("made precious.txt", ["precious.txt"])},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    done = real_lane.board.get_task(task.id)
    assert done.status is Status.DONE, real_lane.task_log(task.id)[-3000:]
    worktree = real_lane.home.worktree(BOARD, task.id)
    assert (worktree / "precious.txt").read_text() == "precious\n"
    said = tool_outputs(model_server.requests(name, provider)[-1], provider)
    assert len(said) == 2 and REFUSALS[provider] in said[1], said


def test_codex_workspace_write_keeps_its_writes_in_the_worktree(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """Under codex's own sandbox a command writes in the worktree and nowhere else (a
    directory of the worker's outside /tmp, which the sandbox leaves writable), and the
    run still ends done with the runner's commit."""
    assert real_lane.scratch is not None
    outside = Path(tempfile.mkdtemp(prefix="lane-posture-", dir="/var/tmp"))
    os.chown(outside, real_lane.scratch.worker.uid, real_lane.scratch.worker.gid)
    # With /usr/bin/bwrap installed codex's sandbox uses it, and its helper will not
    # start from a CODEX_HOME under /tmp ("execvp codex-linux-sandbox: Permission denied")
    codex_home = Path(tempfile.mkdtemp(prefix="lane-posture-codex-", dir="/var/tmp"))
    os.chown(codex_home, real_lane.scratch.worker.uid, real_lane.scratch.worker.gid)
    real_lane.extra_env["CODEX_HOME"] = str(codex_home)
    try:
        _sandboxed_run(real_lane, model_server, outside)
    finally:
        shutil.rmtree(outside)
        shutil.rmtree(codex_home)


def _sandboxed_run(real_lane: RealLane, model_server: ModelServer, outside: Path) -> None:
    # codex's own sandbox alone (isolation = user): inside the runner's, the directory
    # outside is not even there, and the refusal reads "No such file or directory".
    real_lane.write_config(codex_sandbox="workspace-write", isolation="user")
    name = marker("sandbox")
    model_server.script(name, codex=[
        {"shell": f"echo inside > inside.txt; echo escaped > {outside}/escaped.txt"},
        {"answer": answer("made inside.txt", ["inside.txt"])},
    ])
    task = real_lane.add(name, assignee="cli-codex-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    done = real_lane.board.get_task(task.id)
    assert done.status is Status.DONE, real_lane.task_log(task.id)[-3000:]
    assert (real_lane.home.worktree(BOARD, task.id) / "inside.txt").read_text() == "inside\n"
    assert not (outside / "escaped.txt").exists()
    [said] = tool_outputs(model_server.requests(name, "codex")[-1], "codex")
    assert "Read-only file system" in said, said
    assert 'sandbox_mode="workspace-write"' in real_lane.task_log(task.id)
