"""The randomized crash campaign (``bench/campaign``), longer than CI's: two runner
homes on one PostgreSQL board sharing one git repository, kill -9 at moments a seed
chooses, and what the kills cost counted: lost results, duplicate result commits,
second CLI runs after an accepted result, follow-ups repeated without their key,
processes left. Every count has the target zero."""

from __future__ import annotations

import os
from pathlib import Path

from bench.campaign import Plan, run
from bench.postgres import database, unavailable
from bench.result import Check, Figure
from bench.scale import Scale

COUNTS = ("lost", "duplicate_commits", "second_runs", "followups_twice", "processes_left",
          "unfinished", "followups_missing", "unrecorded")


def measure(scale: Scale, workdir: Path) -> Figure:
    figure = Figure(
        key="campaign",
        title="A randomized crash campaign on two homes",
        baseline="none: every count's target is zero",
        columns=["seed", "kills", "tasks", *[name.replace("_", " ") for name in COUNTS],
                 "minutes"],
    )
    why_not = unavailable() or (
        None if scale.campaign_kills else
        "not at this scale (tests/postgres/test_campaign.py runs the campaign in the suite)"
    )
    if why_not:
        figure.notes.append(f"Skipped: {why_not}.")
        return figure
    plan = Plan.chosen(os.environ, scale.campaign_kills, scale.campaign_seconds,
                       scale.campaign_backlog)
    with database("bench_campaign") as url:
        outcome = run(workdir, url, plan)
    counts = outcome.counts
    figure.rows.append([str(plan.seed), str(outcome.kills), str(counts.tasks),
                        *[str(getattr(counts, name)) for name in COUNTS],
                        f"{outcome.seconds / 60:.1f}"])
    figure.checks = [
        Check(f"{name.replace('_', ' ')} = 0", str(getattr(counts, name)),
              getattr(counts, name) == 0)
        for name in COUNTS
    ]
    figure.notes.append(
        f"{outcome.steps} steps of the seed's schedule in {outcome.seconds:.0f} s: a daemon "
        "killed -9 within 0-1.5 s of its start's recovery (sometimes during it), or both, "
        "or one CLI; each killed daemon started again at once, after `lane-runner recover` "
        "on about a third of the restarts. Run again: "
        f"`{outcome.reproduce('python -m bench --only campaign')}`."
    )
    figure.notes += [f"{name}: {', '.join(found[:20])}" for name, found in
                     counts.examples.items()]
    figure.notes += [f"Note: {note}" for note in outcome.notes]
    print(f"  {outcome.line}", flush=True)
    return figure
