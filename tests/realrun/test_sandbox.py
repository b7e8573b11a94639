"""The real CLIs under ``isolation = sandbox``: each finishes a task through the egress
proxy, while a tool it runs finds neither the runner's home, nor a neighbouring task's
worktree, nor the model server on the daemon's own loopback (see conftest.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.harness import BOARD

from .conftest import ModelServer, RealLane, answer, marker
from .test_work import assert_committed_once

pytestmark = pytest.mark.timeout(600)

PROBE = """
for f in {secrets}; do cat "$f" >/dev/null 2>&1 && echo "read $f"; done > probe.txt
python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)" \
  2>/dev/null && echo "reached 127.0.0.1:{port} directly" >> probe.txt
echo probed >> probe.txt
"""


def _worker_reads(lane: RealLane, path: str) -> bool:
    """Whether the worker user, outside any sandbox, can read ``path``."""
    assert lane.scratch is not None and lane.scratch.worker.name
    worker = lane.scratch.worker
    done = subprocess.run(["setpriv", f"--reuid={worker.uid}", f"--regid={worker.gid}",
                           "--clear-groups", "cat", path], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_sandboxed_cli_finishes_its_task_through_the_proxy_and_reaches_nothing_else(
    real_lane: RealLane, model_server: ModelServer, provider: str
) -> None:
    """Catches: the proxy variables not given to the CLI, or the gateway left off the
    allow-list (the CLI could not reach the model: the task would not be done); the home
    or the worktrees' folder bound into the sandbox (a secret read); the sandbox sharing
    the daemon's network (the model server reached without the proxy)."""
    assert real_lane.scratch is not None
    if not real_lane.scratch.worker.name:
        pytest.skip("the sandbox is tried as root with a worker user")
    real_lane.write_config(isolation="sandbox")
    os.chmod(real_lane.root, 0o711)
    home_secret = real_lane.root / "probe-secret.txt"
    home_secret.write_text("the runner's\n")
    home_secret.chmod(0o644)
    neighbour = real_lane.home.worktree(BOARD, "neighbour")
    neighbour.mkdir(parents=True)
    (neighbour / "secret.txt").write_text("the neighbour's\n")
    worker = real_lane.scratch.worker
    for path in (neighbour.parent, neighbour, neighbour / "secret.txt"):
        os.chown(path, worker.uid, worker.gid)
    secrets = [str(home_secret), str(neighbour / "secret.txt")]
    assert all(_worker_reads(real_lane, secret) for secret in secrets)  # real without it
    name = marker(f"sandbox-{provider}")
    probe = PROBE.format(secrets=" ".join(secrets), port=model_server.port)
    model_server.script(name, **{provider: [
        {"shell": probe}, {"answer": answer("probed", ["probe.txt"])},
    ]})
    task = real_lane.add(name, assignee=f"cli-{provider}-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    assert_committed_once(real_lane, task.id, "probe.txt")
    worktree = real_lane.home.worktree(BOARD, task.id)
    assert (worktree / "probe.txt").read_text() == "probed\n"
    assert model_server.requests(name, provider)  # through the proxy: the only way out
