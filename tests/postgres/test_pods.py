"""Three pods on one PostgreSQL board; one is cut off and killed for good mid-run.

Its runs come back through their expired leases, the other pods finish every
task, and recovering its home turns the results it still held into conflict
records without touching the board.
"""

from __future__ import annotations

import orjson
from psycopg.conninfo import conninfo_to_dict

from lane_runner.board.model import Outcome

from .conftest import Fleet, Partition, Pod

TASKS = 300
SLOW = "[sim:slow:0.15:6]"  # about a second of provider work: runs are in flight when cut


def test_three_pods_one_killed_for_good(fleet: Fleet) -> None:
    server = conninfo_to_dict(fleet.url)
    partition = Partition(str(server["host"]), int(server["port"]))
    doomed_url = fleet.url.replace(f":{server['port']}/", f":{partition.port}/")
    first, second = fleet.pod("pod-a"), fleet.pod("pod-b")
    doomed = fleet.pod("pod-c", board_url=doomed_url)
    fleet.add(TASKS, slow_every=4, slow=SLOW)

    survivors = [first.start("--until-idle"), second.start("--until-idle")]
    doomed.start()
    fleet.wait(
        lambda: fleet.done() >= 60 and len(fleet.board.running_runs(doomed.node)) >= 2,
        timeout=120,
        what="pod-c to be mid-run",
    )
    partition.cut()
    fleet.wait(
        lambda: any(not landed(fleet, name) for name in pending(doomed)),
        timeout=30,
        what="pod-c to hold an accepted result it cannot commit",
    )
    doomed.kill()
    held = pending(doomed)

    for daemon in survivors:
        assert daemon.wait(timeout=240) == 0, fleet.pods[0].log_tail()

    doomed_runs = [
        run
        for task in fleet.tasks()
        for run in fleet.board.runs(task.id)
        if run.node == doomed.node
    ]
    rescued = [run for run in doomed_runs if run.outcome is Outcome.EXPIRED]
    assert rescued, "pod-c's runs should have come back through their leases"
    assert all(f"lease of node {doomed.node} expired" == run.reason for run in rescued)
    assert all(run.ended_at is not None for run in doomed_runs)
    held_runs = {int(name.split(".run-")[1].split(".")[0]) for name in held}
    assert held_runs <= {run.id for run in doomed_runs}

    board_before = (fleet.board.counts(), fleet.board.events(), fleet.tasks())
    doomed.write_config(board_url=fleet.url)  # the pod's home, recovered where the DB is reachable
    recovered = doomed.cli("recover", "--json")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert orjson.loads(recovered.stdout)["reclaimed"] == []  # none of pod-c's runs still ran
    assert (fleet.board.counts(), fleet.board.events(), fleet.tasks()) == board_before

    entries = doomed.journal_kinds()
    assert not [e for e in entries if e[0] in ("pending", "prepared", "staging") or not e[2]]
    settled = {
        name.split(".terminal.")[0]: kind for kind, name, _ in entries
        if kind in ("conflict", "committed")
    }
    conflicts = 0
    for name in held:
        stem = name.split(".terminal.")[0]
        if landed(fleet, name):
            assert settled[stem] == "committed"  # it landed; only the answer was lost in the cut
        else:
            assert settled[stem] == "conflict"  # refused by the exact-run guard, kept in full
            conflicts += 1
    assert conflicts, "pod-c held no result that another pod's run had superseded"
    fleet.assert_done_exactly_once()  # after recovery: a commit whose answer was lost is recorded


def pending(pod: Pod) -> set[str]:
    return {name for kind, name, _ in pod.journal_kinds() if kind == "pending"}


def landed(fleet: Fleet, name: str) -> bool:
    """Whether the board already holds this pending result as its task's completion.

    A result whose commit was in flight when the link was cut lands with its answer
    lost; one that never left the pod can only end as a conflict. The test waits for
    the second kind, since the first alone proves nothing about superseded results.
    """
    stem = name.split(".terminal.")[0]
    task_id, run_id = stem.split(".run-")[0], int(stem.split(".run-")[1])
    return fleet.board.get_task(task_id).completed_run_id == run_id
