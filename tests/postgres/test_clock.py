"""One clock for every pod: leases on a PostgreSQL board are the database's time.

Two pods whose clocks are ten minutes apart (one behind, one ahead, through the
runner's test-only clock offset) share a board. Runs last longer than the lease,
so they live only through heartbeats. Were leases stamped with a node's clock,
the pod ahead would see the other's leases long expired and rescue its live runs,
and the dead pod ahead would keep its runs for twenty minutes; with the database's
clock nothing changes: no live run is rescued, and the dead pod's runs come back
as soon as their leases end.
"""

from __future__ import annotations

from lane_runner.board.model import Outcome

from .conftest import Fleet

SKEW = 600.0  # seconds each pod's clock is off, in opposite directions
TASKS = 12
LONG = "[sim:slow:0.5:10]"  # five seconds of provider work: longer than the 3 s lease


def test_pods_minutes_apart_keep_their_runs_and_lose_the_dead_ones(fleet: Fleet) -> None:
    behind = fleet.pod("behind", clock_offset=-SKEW)
    ahead = fleet.pod("ahead", clock_offset=SKEW)
    fleet.add(TASKS, slow_every=1, slow=LONG)
    behind.start()
    ahead.start()
    fleet.wait(
        lambda: fleet.done() >= 4
        and len(fleet.board.running_runs(behind.node)) >= 1
        and len(fleet.board.running_runs(ahead.node)) >= 1,
        timeout=120,
        what="both pods to have finished runs and hold live ones",
    )
    ahead.kill()  # for good, mid-run: its leases must end on the database's clock
    held = {run.id for run in fleet.board.running_runs(ahead.node)}  # its leases outlive it
    assert held

    fleet.wait(
        lambda: not fleet.board.running_runs(ahead.node),
        timeout=60,  # a node-clock lease of the pod ahead would last twenty minutes here
        what="the dead pod's runs back in ready",
    )
    fleet.wait(lambda: fleet.done() == TASKS, timeout=240, what="every task done")
    behind.kill()
    # The pod killed mid-run may have been between its board commit and its journal's
    # rename: its record waits as pending until its home is recovered, as an operator
    # does when the volume is used again (seen once in CI: the task done, its record
    # pending in the dead pod's journal).
    assert ahead.cli("recover").returncode == 0

    runs = [run for task in fleet.tasks() for run in fleet.board.runs(task.id)]
    expired = [run for run in runs if run.outcome is Outcome.EXPIRED]
    assert {run.id for run in expired} == held  # only the dead pod's, none of the live pod's
    assert all(run.node == ahead.node for run in expired)
    fleet.assert_done_exactly_once()
