"""On a PostgreSQL board: what one task plants in its own git directory (a hook, a
filter, configuration, the next task's branch) reaches no other task, and the other
task's own ``git commit`` is delivered (issue 47; on SQLite, with the reasons:
``tests/daemon/test_task_git.py``)."""

from __future__ import annotations

import subprocess

from lane_runner.board.model import NewTask, Status
from lane_runner.run import workspace
from tests.daemon.test_task_git import ATTACKER, SCRIPT, VICTIM

from .conftest import BOARD, Fleet


def git(*args: str, cwd: object) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True,
                          text=True).stdout


def test_what_one_task_plants_reaches_no_other_task_on_a_shared_board(fleet: Fleet) -> None:
    pod = fleet.pod("home-a")
    marker = fleet.root / "planted.ran"
    attacker = fleet.board.add_task(NewTask(title="attacker", workspace=str(fleet.repo)))
    victim = fleet.board.add_task(NewTask(title="victim", workspace=str(fleet.repo)))
    branch = workspace.branch_name(BOARD, victim.id)
    script = SCRIPT.format(attacker=ATTACKER.format(marker=marker, victim_branch=branch),
                           victim=VICTIM)
    pod.write_config(isolation="none", concurrency=1,
                     hooks={"*": {"before_run": script}})
    assert pod.start("--until-idle").wait(timeout=180) == 0
    for task in (attacker, victim):
        done = fleet.board.get_task(task.id)
        assert done.status is Status.DONE, done.block_reason
    assert not marker.exists()
    [event] = [e for e in fleet.board.events(victim.id) if e.kind == "completed"]
    delivered = event.data["metadata"]["delivery"]
    assert delivered["base"] == git("rev-parse", "HEAD", cwd=fleet.repo).strip()
    log = git("log", "--format=%s", f"{delivered['base']}..{branch}", cwd=fleet.repo)
    assert "the victim's own" in log and "the attacker's" not in log
