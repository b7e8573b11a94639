"""The storm breaker's promises under random failures, successes and probes (issue 32).

Failures of eight tasks in three workspaces of one board, with two fingerprints, at
random moments; successes of a workspace; probes; operators clearing. Whatever the
order, a trip names at least ``threshold`` distinct tasks of what it marks, a
workspace's trip only its own tasks, a board's trip tasks of more than one workspace
(one workspace failing alone trips that workspace, never the board), and the claim
skips exactly the broken workspaces whose probe is not due.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from lane_runner.service import breaker

BOARD = "b"
WORKSPACES = ("/srv/a", "/srv/b", "/srv/c")
THRESHOLD = 3
WINDOW = 300.0
PROBE = 200.0


def workspace_of_task(task: int) -> str:
    return WORKSPACES[task % len(WORKSPACES)]


class BreakerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.state = breaker.Breaker(
            Path(self.directory.name) / "breaker.json",
            threshold=THRESHOLD, window=WINDOW, probe_interval=PROBE,
        )
        self.now = 0.0

    def teardown(self) -> None:
        self.directory.cleanup()

    @rule(task=st.integers(0, 7), kind=st.integers(0, 1), later=st.floats(0, 120))
    def fail(self, task: int, kind: int, later: float) -> None:
        self.now += later
        workspace = workspace_of_task(task)
        before = set(self.state.trips())
        trip = self.state.failed(breaker.Failure(
            breaker.workspace_scope(BOARD, workspace), f"hook: error {kind}", f"{BOARD}/t{task}",
            f"error {kind}", self.now, breaker.scope(breaker.BOARD, BOARD),
        ))
        if trip is not None:
            assert trip.scope not in before  # a scope trips once until it is cleared
            assert trip.tripped_at == self.now and trip.probe_at == self.now + PROBE
        elif {breaker.workspace_scope(BOARD, workspace), f"board:{BOARD}"} & before:
            assert set(self.state.trips()) == before  # accounted for: nothing new

    @rule(workspace=st.sampled_from(WORKSPACES))
    def succeed(self, workspace: str) -> None:
        where = breaker.workspace_scope(BOARD, workspace)
        self.state.succeeded(where, breaker.scope(breaker.BOARD, BOARD))
        assert where not in self.state.trips() and f"board:{BOARD}" not in self.state.trips()

    @rule(workspace=st.sampled_from(WORKSPACES), later=st.floats(0, 300))
    def probe(self, workspace: str, later: float) -> None:
        self.now += later
        where = breaker.workspace_scope(BOARD, workspace)
        due = workspace not in self.state.broken_workspaces(BOARD, self.now)
        assert self.state.admits(where, self.now) == due
        # A probe begun, the next is a probe_interval away: the claim skips it again.
        assert workspace in self.state.broken_workspaces(BOARD, self.now) or where not in (
            self.state.trips()
        )

    @rule(workspace=st.sampled_from(WORKSPACES))
    def clear(self, workspace: str) -> None:
        breaker.clear(self.state.path, breaker.workspace_scope(BOARD, workspace))

    @invariant()
    def trips_name_what_they_mark(self) -> None:
        for where, trip in self.state.trips().items():
            assert trip.count >= THRESHOLD and len(trip.tasks) == min(trip.count, breaker.NAMED)
            spans = {workspace_of_task(int(task.split("/t")[1])) for task in trip.tasks}
            workspace = breaker.workspace_of(where, BOARD)
            if workspace is not None:
                assert spans == {workspace}
            else:
                assert where == f"board:{BOARD}" and len(spans) > 1

    @invariant()
    def the_claim_skips_the_broken_workspaces_not_due_a_probe(self) -> None:
        trips = self.state.trips()
        expected = {
            workspace for workspace in WORKSPACES
            if (trip := trips.get(breaker.workspace_scope(BOARD, workspace)))
            and self.now < trip.probe_at
        }
        assert self.state.broken_workspaces(BOARD, self.now) == expected


TestBreakerMachine = BreakerMachine.TestCase
TestBreakerMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
