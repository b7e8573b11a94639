"""The real CLIs under a pool of worker users (``worker_users``, ``isolation = user``;
docs/security.md, "A pool of worker users"): codex implements and claude reviews, each
as the pool user the run was leased, with that user's own CLI home; the task is done
exactly once."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from tests.harness import BOARD

from .conftest import ModelServer, RealLane, answer, marker
from .test_verify import review
from .test_work import assert_committed_once

POOL = tuple(filter(None, os.environ.get("LANE_POOL_USERS", "").split(",")))
pytestmark = [pytest.mark.timeout(600), pytest.mark.skipif(
    os.geteuid() != 0 or len(POOL) < 2, reason="needs root and LANE_POOL_USERS (.ci/run)")]


def _share_with_the_pool(repo: Path, owner: pwd.struct_passwd) -> None:
    """The repository as docs/security.md has the operator make it: the pool's group's,
    group-writable, shared. Owned by the pool's first user, whom a lone slot leases, so
    its git trusts it without a system-wide ``safe.directory``."""
    for path in [repo, *repo.rglob("*")]:
        os.chown(path, owner.pw_uid, owner.pw_gid, follow_symlinks=False)
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o060 | (0o010 if path.is_dir() else 0))
    subprocess.run(["git", "-c", "safe.directory=*", "config", "core.sharedRepository",
                    "group"], cwd=repo, check=True)


def test_codex_implements_and_claude_reviews_each_as_the_pool_user_of_the_run(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    """Catches: a pool run's CLI started as ``worker_user`` or root, or with the daemon's
    CLI home rather than its user's (no work, or files and claude's session owned by
    another user); the review not run as the run's pool user."""
    first = pwd.getpwnam(POOL[0])
    real_lane.config.pop("worker_user", None)
    # each pool user's own CLI home (its HOME), not the harness's shared one
    real_lane.extra_env.update(CODEX_HOME="", CLAUDE_CONFIG_DIR="")
    real_lane.write_config(worker_users=list(POOL), isolation="user", review="auto",
                           concurrency=1)
    _share_with_the_pool(real_lane.repo, first)
    name = marker("pool")
    model_server.script(name, codex=[
        {"shell": "echo made > made.txt"}, {"answer": answer("made made.txt", ["made.txt"])},
    ], claude=[{"answer": review("approve")}])
    task = real_lane.add(name, assignee="cli-codex-low")
    assert real_lane.start("--until-idle").wait(timeout=400) == 0, real_lane.task_log(task.id)
    assert_committed_once(real_lane, task.id, "made.txt")
    worktree = real_lane.home.worktree(BOARD, task.id)
    assert (worktree / "made.txt").stat().st_uid == first.pw_uid  # codex, as the pool user
    assert f"works as pool user {first.pw_name}" in (real_lane.root / "daemon.log").read_text()
    assert model_server.requests(name, "claude")
    sessions = [path for path in (Path(first.pw_dir) / ".claude" / "projects").rglob("*.jsonl")
                if name in path.read_text(errors="replace")]
    assert sessions and all(path.stat().st_uid == first.pw_uid for path in sessions)
    assert real_lane.live_workers() == []
