"""The waste figure (bench/waste, bench/figures/waste.py): its pure parts on hand-made
logs, and a smoke of the whole figure with the real CLIs (two tasks per pass, one
daemon kill, one CLI kill, one PostgreSQL restart), so it cannot rot. No timing is
asserted: the counts are."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from bench.figures import waste
from bench.result import Figure
from bench.waste import plan, site, tally
from bench.waste.drive import Mode, Pass
from bench.waste.plan import Fault


def test_a_seed_gives_its_faults_every_time_and_all_of_them() -> None:
    assert plan.faults(5, plan.FULL) == plan.faults(5, plan.FULL)
    assert plan.faults(5, plan.FULL) != plan.faults(6, plan.FULL)
    kinds = Counter(step.fault for step in plan.faults(5, plan.FULL))
    assert kinds == {Fault.DAEMON: 8, Fault.CLI: 1, Fault.POSTGRES: 1}
    assert all(0 < step.wait <= 1 for step in plan.faults(5, plan.FULL))


def test_a_tasks_script_runs_marked_tools_then_answers_with_their_files() -> None:
    steps = plan.steps(plan.SMOKE, "done")
    assert all(plan.TOOL_MARK in step["shell"] for step in steps[:-1])
    assert len(steps) == plan.SMOKE.tools + 1
    assert steps[-1]["answer"]["changed_files"] == [plan.file_name(0), plan.file_name(1)]


def entry(marker: str | None, at: float, session: str = "s1", size: int = 0) -> dict[str, object]:
    return {"marker": marker, "at": at, "session": session, "body": {"x": "y" * size}}


def test_the_tally_counts_a_passes_own_requests_and_what_came_after_acceptance() -> None:
    entries = [entry("a", 1.0, size=392), entry("a", 2.0, size=392), entry(None, 2.5),
               entry("b", 3.0, "s2"), entry("other-pass", 3.5), entry("a", 9.0, "s3")]
    accepted = [tally.Accepted("a", 5.0, 1), tally.Accepted("b", 4.0, 2)]
    cost = tally.count(entries, ["a", "b"], accepted)
    assert (cost.requests, cost.sessions, cost.second_runs, cost.twice) == (4, 3, 1, 1)
    assert cost.requests_per_task == 2.0
    assert tally.tokens(entries[0]) == 100  # {"x":"y…"} is 400 bytes
    assert cost.tokens == 200 + 2 * tally.tokens(entry("b", 0))  # b and the late a


def test_a_pass_with_a_task_not_accepted_misses_the_target() -> None:
    cost = tally.Cost(tasks=2, accepted=1, requests=3, tokens=30, sessions=1, second_runs=0,
                      twice=0)
    calm = Pass(Mode.CALM, cost, 1.0)
    full = tally.Cost(tasks=2, accepted=2, requests=6, tokens=60, sessions=2, second_runs=0,
                      twice=0)
    checks = waste.checks(Pass(Mode.CALM, full, 1.0), calm, calm, plan.SMOKE)
    assert [c.met for c in checks] == [False, False, None, False]


@pytest.mark.timeout(900)
def test_the_figure_runs_calm_under_faults_and_from_scratch_with_the_real_clis() -> None:
    why_not = site.unavailable(plan.PROVIDERS)
    if why_not is not None:
        if os.environ.get("LANE_CONTRACT_REQUIRED") == "1":
            pytest.fail(f"LANE_CONTRACT_REQUIRED=1 but {why_not}", pytrace=False)
        pytest.skip(why_not)
    figure = waste.fill(Figure("waste", "", "", []), plan.SMOKE, waste.SEED)
    calm, faults, scratch = figure.rows
    tasks = f"{plan.SMOKE.tasks}/{plan.SMOKE.tasks}"
    assert [calm[1], faults[1], scratch[1]] == [tasks] * 3, figure.notes
    assert [calm[5], faults[5], scratch[5]] == ["0", "3", "3"]
    assert "no tool was running" not in " ".join(figure.notes)
    assert int(calm[4]) == plan.SMOKE.tasks  # one session per task when nothing fails
    assert int(scratch[4]) > plan.SMOKE.tasks, "the baseline started no new session"
    second = figure.checks[-1]
    assert (second.measured, second.met) == ("0", True)
