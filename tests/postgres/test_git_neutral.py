"""On a PostgreSQL board: every program a task plants in its repository at once (hooks, a
clean filter, an fsmonitor, a signer) runs in none of the runner's git, and the result
commit holds the worktree's bytes (issue 47; the attacks one by one, on SQLite, are
``tests/daemon/test_git_neutral.py``)."""

from __future__ import annotations

from lane_runner.board.model import NewTask, Status
from tests.daemon.test_git_neutral import ATTACKS, PROGRAM, assert_committed_as_it_is

from .conftest import BOARD, WORKSPACE, Fleet


def test_nothing_a_task_plants_runs_in_the_runners_git_on_a_shared_board(fleet: Fleet) -> None:
    pod = fleet.pod("home-a")
    planted, markers = [], []
    for attack, (shell, then) in sorted(ATTACKS.items()):
        marker, program = fleet.root / f"{attack}.ran", fleet.root / f"{attack}.sh"
        program.write_text(PROGRAM.format(marker=marker, then=then))
        program.chmod(0o755)
        planted.append(shell.format(program=program, name=attack))
        markers.append(marker)
    pod.write_config(hooks={"*": {"before_run": "; ".join(planted)}})
    task = fleet.board.add_task(NewTask(title="plants everything", workspace=WORKSPACE))
    assert pod.start("--until-idle").wait(timeout=120) == 0
    done = fleet.board.get_task(task.id)
    assert done.status is Status.DONE, done.block_reason
    assert [marker.name for marker in markers if marker.exists()] == []
    assert_committed_as_it_is(pod.home.worktree(BOARD, task.id))
