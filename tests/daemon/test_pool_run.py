"""A whole run under a pool of worker users (``worker_users``), through the executor as
the daemon runs it: the run works as the user the pool leased it, its worktree and its
result outbox are that user's alone, and the other pool user, running a task's code
beside it, cannot plant a file the runner commits, forge its answer or read its work
(issue 47, case 2; docs/security.md, "A pool of worker users")."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.board.model import NewTask
from lane_runner.run import keeping, ownership, workspace
from lane_runner.run.executor import RunExecutor
from lane_runner.service import workerpool
from lane_runner.service.services import build
from tests.daemon.test_executor import FAKE_CODEX
from tests.harness import BOARD

POOL = tuple(filter(None, os.environ.get("LANE_POOL_USERS", "").split(",")))
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or len(POOL) < 2, reason="needs root and LANE_POOL_USERS (.ci/run)"
)

#: The neighbour's attack, run as the other pool user while the victim's CLI works:
#: plant a file in the victim's worktree, forge its answer in its outbox, list both.
ATTACK = """#!/bin/sh
folder="$1"; task="$2"
ls "$folder" "$folder/$task" "$folder/.$task.out" 2>/dev/null && echo LISTED
echo planted > "$folder/$task/planted.txt" 2>/dev/null && echo PLANTED
for f in "$folder/.$task.out"/*; do echo '{"forged":1}' > "$f" 2>/dev/null && echo FORGED; done
mv "$folder/$task" "$folder/stolen" 2>/dev/null && echo MOVED
exit 0
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_run_under_the_pool_is_out_of_its_neighbours_reach(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, backend: str,
) -> None:
    """On either board (the attack goes through the files, not the board: under `user`
    isolation the board's loopback stays reachable, docs/security.md)."""
    board_url = request.getfixturevalue("postgres_database") if backend == "postgres" else None
    victim = pwd.getpwnam(POOL[0])
    base = Path(tempfile.mkdtemp(prefix="lane-runner-pool-"))
    try:
        base.chmod(0o755)
        attack = base / "attack"
        attack.write_text(ATTACK)
        attack.chmod(0o755)
        said = base / "said"
        said.mkdir(mode=0o777)
        said.chmod(0o777)
        # the CLI, before it answers, has the neighbour attack (runuser as root is not
        # the CLI's to run: the test's own hook, a file the neighbour's code reads)
        codex = base / "codex"
        codex.write_text(FAKE_CODEX.replace(
            'echo "edited by',
            f'touch {said}/go; while [ ! -e {said}/done ]; do sleep 0.05; done\necho "edited by',
        ))
        codex.chmod(0o755)
        repo = base / "repo"
        repo.mkdir()
        for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "i"]):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                           cwd=repo, check=True)
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, victim.pw_uid, victim.pw_gid)
        monkeypatch.setenv("IS_SANDBOX", "1")
        codex_home = base / "codex-home"
        codex_home.mkdir()
        os.chown(codex_home, victim.pw_uid, victim.pw_gid)
        monkeypatch.setenv("CODEX_HOME", str(codex_home))
        environ = {
            "LANE_RUNNER_WORKER_USERS": ",".join(POOL),
            "LANE_RUNNER_CODEX_BIN": str(codex),
            "LANE_RUNNER_ISOLATION": "user",
        }
        if board_url is not None:
            environ["LANE_RUNNER_BOARD_URL"] = board_url
        cfg = config.load(base / "home", environ)
        built = build(cfg)
        assert (board_url is None) == ("postgres" not in type(built.store).__module__)
        neighbour_ran: list[str] = []
        try:
            board = built.store.create_board(BOARD)
            task = board.add_task(NewTask(title="edit", assignee="cli-codex-low",
                                          workspace=str(repo)))
            found = board.claim(built.node, 60, "cli-auto")
            assert found is not None
            folder = built.home.worktree(BOARD, task.id).parent

            import threading

            def neighbour() -> None:
                while not (said / "go").exists():
                    if stop.wait(0.05):
                        return
                done = subprocess.run(["runuser", "-u", neighbour_user, "--", str(attack),
                                       str(folder), task.id], capture_output=True, text=True)
                neighbour_ran.append(done.stdout + done.stderr)
                (said / "done").touch()

            stop = threading.Event()
            thread = threading.Thread(target=neighbour, daemon=True)
            run_cfg = built.worker_pool.for_run(built.cfg, found.run.id)
            assert run_cfg.worker_user == victim.pw_name  # the pool's first, free
            # the neighbour runs as whatever the pool leases a second run in flight
            neighbour_user = built.worker_pool.for_run(built.cfg, found.run.id + 1).worker_user
            assert neighbour_user is not None
            thread.start()
            report = RunExecutor(built, found, run_cfg).execute()
            stop.set()
            thread.join(30)
            assert report.ended == "committed", report
            assert neighbour_ran, "the neighbour never ran"
            out = neighbour_ran[0]
            for word in ("LISTED", "PLANTED", "FORGED", "MOVED"):
                assert word not in out, out  # caught: any of the folder, worktree, outbox
            worktree = built.home.worktree(BOARD, task.id)
            assert (worktree / "edit.txt").read_text() == f"edited by {victim.pw_name}\n"
            assert not (worktree / "planted.txt").exists()
            assert stat.S_IMODE(worktree.stat().st_mode) == 0o700
            assert stat.S_IMODE(folder.stat().st_mode) == 0o1733
            held = board.get_task(task.id)
            assert "forged" not in json.dumps(held.result or {})
            # after the run (the cleanup sweep, recovery) the runner's git works in the
            # worktree as the pool user owning it: as root, git refuses a worker's files
            # and the sweep would keep the worktree for ever ("would lose" its work)
            owner = workerpool.owner_of(worktree, built.cfg)
            assert owner == victim.pw_name
            assert keeping.would_lose(worktree, owner) is None
            outbox = ownership.outbox_of(worktree)
            assert outbox.is_dir() and not any(outbox.iterdir())  # each answer taken
            assert workspace.remove(worktree, owner) is None
            assert not outbox.exists()  # caught: an outbox per task left for ever
        finally:
            built.close()
    finally:
        shutil.rmtree(base)
