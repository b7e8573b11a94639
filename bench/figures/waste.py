"""Waste under faults (issue 46): model requests and prompt tokens per accepted task,
the real CLIs against the scripted model server, calm vs under faults (8 daemon kill
-9s at seeded moments, a CLI killed mid tool call, one PostgreSQL restart), and a
restart-from-scratch design under the same faults as the baseline. A second CLI run
over an accepted result fails the figure."""

from __future__ import annotations

import os
from pathlib import Path

from bench.result import Check, Figure
from bench.scale import Scale
from bench.waste import drive, plan, site
from bench.waste.drive import Mode, Pass

TARGET = 1.15
"""Faults vs calm, requests and tokens per accepted task: at most this."""
SEED = 46


def size_for(scale: Scale) -> plan.Size:
    return plan.SMOKE if scale.name == "smoke" else plan.FULL


def measure(scale: Scale, workdir: Path) -> Figure:
    figure = Figure(
        key="waste",
        title="Waste under faults: model calls per accepted task, real CLIs",
        baseline="the same tasks calm; and a restart-from-scratch design under the same "
                 "faults (a crashed run starts a new session)",
        columns=["pass", "tasks accepted", "requests/task", "prompt tokens/task",
                 "sessions", "faults", "second runs", "vs calm (requests)",
                 "vs calm (tokens)", "minutes"],
    )
    why_not = site.unavailable(plan.PROVIDERS) or (
        "not at this scale (tests/bench/test_waste.py runs it in the suite)"
        if scale.name == "smoke" else None)
    if why_not:
        figure.notes.append(f"Skipped: {why_not}.")
        return figure
    return fill(figure, size_for(scale), int(os.environ.get("LANE_WASTE_SEED", SEED)))


def fill(figure: Figure, size: plan.Size, seed: int) -> Figure:
    """Run the three passes and write them into ``figure``."""
    with site.world() as (root, postgres, server):
        calm = drive.run(root, postgres, server, Mode.CALM, size, seed, 0.0)
        spread = calm.seconds / (size.daemon_kills + 3)
        faults = drive.run(root, postgres, server, Mode.FAULTS, size, seed, spread)
        scratch = drive.run(root, postgres, server, Mode.SCRATCH, size, seed, spread)
    for done in (calm, faults, scratch):
        figure.rows.append(row(done, calm))
    figure.checks = checks(calm, faults, scratch, size)
    figure.notes += notes(faults, scratch, size, seed)
    return figure


def _ratio(value: float, base: float) -> float:
    return value / base if base else float("inf")


def row(done: Pass, calm: Pass) -> list[str]:
    cost, base = done.cost, calm.cost
    return [done.mode.value, f"{cost.accepted}/{cost.tasks}", f"{cost.requests_per_task:.2f}",
            f"{cost.tokens_per_task:,.0f}", str(cost.sessions), str(len(done.faults)),
            str(cost.second_runs),
            f"{_ratio(cost.requests_per_task, base.requests_per_task):.2f}×",
            f"{_ratio(cost.tokens_per_task, base.tokens_per_task):.2f}×",
            f"{done.seconds / 60:.1f}"]


def checks(calm: Pass, faults: Pass, scratch: Pass, size: plan.Size) -> list[Check]:
    requests = _ratio(faults.cost.requests_per_task, calm.cost.requests_per_task)
    tokens = _ratio(faults.cost.tokens_per_task, calm.cost.tokens_per_task)
    base = _ratio(scratch.cost.requests_per_task, calm.cost.requests_per_task)
    every = all(p.cost.accepted == size.tasks for p in (calm, faults, scratch))
    again = faults.cost.second_runs + faults.cost.twice
    return [
        Check(f"faults vs calm, requests per accepted task ≤ {TARGET}×", f"{requests:.2f}×",
              every and requests <= TARGET),
        Check(f"faults vs calm, prompt tokens per accepted task ≤ {TARGET}×", f"{tokens:.2f}×",
              every and tokens <= TARGET),
        Check("restart from scratch vs calm, requests per accepted task (the baseline)",
              f"{base:.2f}×", None),
        Check("second CLI runs over an accepted result, or results delivered twice = 0",
              str(again), every and again == 0),
    ]


def notes(faults: Pass, scratch: Pass, size: plan.Size, seed: int) -> list[str]:
    said = [
        f"{size.tasks} tasks per pass at concurrency 4, codex and claude alternating, each "
        f"{size.tools} shell tool calls of {size.tool_seconds:g} s and an answer; seed {seed} "
        "(`LANE_WASTE_SEED`). The faults land in the seed's order, each after a random share "
        "of the calm pass's length; a killed daemon is started again at once. Faults made: "
        + "; ".join(faults.faults) + ".",
        "Requests are the scripted server's log lines of the pass's tasks; prompt tokens are "
        "the request bodies' bytes / 4 (what the CLI sent, whole history included). A second "
        "run is a request for a task after its completion was on the board.",
        f"The baseline forgets every unfinished task's CLI sessions while the daemon is down "
        f"({scratch.sessions_forgotten} CLI sessions forgotten over its restarts), so the next "
        "run starts a new session. The CLI killed mid tool call is retried by the live "
        "daemon, which still resumes it: the baseline pays for the daemon kills only.",
    ]
    unfinished = [p for p in (faults, scratch) if p.cost.accepted < p.cost.tasks]
    said += [f"Note: the {p.mode.value} pass ended with {p.cost.accepted} of {p.cost.tasks} "
             "tasks accepted." for p in unfinished]
    return said
