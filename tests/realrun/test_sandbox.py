"""The real CLIs under ``isolation = sandbox``: each finishes a task through the egress
proxy, while a tool it runs finds neither the runner's home, nor a neighbouring task's
worktree, nor the model server on the daemon's own loopback (see conftest.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from lane_runner.board.model import Status
from lane_runner.run import workspace
from tests.daemon.test_task_git import ATTACKER, VICTIM
from tests.harness import BOARD

from .conftest import ModelServer, RealLane, answer, marker
from .test_work import assert_committed_once, git_says

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


@pytest.mark.parametrize("isolation", ["user", "sandbox"])
def test_an_agent_commits_in_its_sandbox_and_plants_nothing_for_the_next_task(
    real_lane: RealLane, model_server: ModelServer, isolation: str
) -> None:
    """Real claude agents (as the worker user, in a sandbox or not), one after the other: the first
    plants a hook, a filter and configuration in its git directory and moves the second
    task's branch there; the second commits its work with git itself, inside its
    sandbox. The second's commit is delivered on its branch of the repository, from the
    repository's HEAD, and nothing planted ran. Catches: a git directory shared by the
    tasks (the second's commit fails on the read-only shared directory, or runs the
    hook), and a clone's object store not mounted (no git works in the sandbox)."""
    assert real_lane.scratch is not None
    if not real_lane.scratch.worker.name:
        pytest.skip("the sandbox is tried as root with a worker user")
    real_lane.write_config(isolation=isolation, concurrency=1)
    planted = real_lane.root / "planted.ran"
    attacker_name, victim_name = marker("attacker"), marker("victim")
    attacker = real_lane.add(attacker_name, assignee="cli-claude-low")
    victim = real_lane.add(victim_name, assignee="cli-claude-low")
    branch = workspace.branch_name(BOARD, victim.id)
    model_server.script(attacker_name, claude=[
        {"shell": ATTACKER.format(marker=planted, victim_branch=branch) + "echo x > a.txt\n"},
        {"answer": answer("planted", ["a.txt"])},
    ])
    model_server.script(victim_name, claude=[
        {"shell": VICTIM + "git log -1 --format=%s > committed.txt\n"},
        {"answer": answer("committed", ["mine.txt"])},
    ])
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    for task in (attacker, victim):
        done = real_lane.board.get_task(task.id)
        assert done.status is Status.DONE, (done, real_lane.task_log(task.id)[-3000:])
    assert not planted.exists()
    worktree = real_lane.home.worktree(BOARD, victim.id)
    assert (worktree / "committed.txt").read_text() == "the victim's own\n"
    subjects = git_says(real_lane, "log", "--format=%s", f"main..{branch}").splitlines()
    assert "the victim's own" in subjects and "the attacker's" not in subjects


def test_opencode_starts_in_its_sandbox_where_another_start_left_its_configuration_empty(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """``opencode --version`` (the runner's version check, doctor) makes the worker's
    opencode configuration folder and leaves it empty; opencode's next start writes its
    ``.gitignore`` there, which the sandbox keeps read-only. Catches: opencode's
    ``prepare`` not writing it first, or ``publish(replace=False)`` not writing a missing
    file (every sandboxed start failed "Unexpected error", as on a fresh CI machine)."""
    assert real_lane.scratch is not None
    if not real_lane.scratch.worker.name:
        pytest.skip("the sandbox is tried as root with a worker user")
    config_home = real_lane.scratch.path("opencode-config", directory=True)
    folder = real_lane.scratch.path("opencode-config", "opencode", directory=True)
    real_lane.install("opencode")
    real_lane.write_config(isolation="sandbox", opencode_env={
        **real_lane.config["opencode_env"], "XDG_CONFIG_HOME": str(config_home)})
    name = marker("sandbox-opencode-config")
    model_server.script(name, opencode=[
        {"shell": "echo made > made.txt"}, {"answer": answer("made made.txt", ["made.txt"])},
    ])
    task = real_lane.add(name, assignee="cli-opencode-low")
    assert real_lane.start("--until-idle").wait(timeout=300) == 0
    assert_committed_once(real_lane, task.id, "made.txt")
    assert (folder / ".gitignore").read_bytes().startswith(b"node_modules\n")
