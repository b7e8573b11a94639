"""Checks and review overhead (issue 46): from a completed answer to the result on the
board, with an instant check and an instant reviewer, minus their own run time.

One task at a time on a daemon with ``checks = ["true"]`` and ``review = "auto"`` (the
simulated implementer is codex, so the reviewer is another simulated CLI); the baseline is
the same daemon with neither, in alternating rounds of one session. Per task:

- the answer's moment: the implementer CLI's exit (the simulators append it to
  ``LANE_RUNNER_SIM_ENDED_LOG`` as they exit; a simulated CLI exits right after its answer);
- the result on the board: the run's ``ended_at`` on the board;
- their own run time: the check's ``seconds`` from the result's evidence, and the reviewer
  CLI's life from its fork (``/proc/self/stat``, 10 ms ticks) to its exit.

What is left is the runner's: saving the answer, running the check, planning, starting,
supervising and reading the reviewer, then accepting and delivering as without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lane import ASSIGNEE, Lane, toml_value
from bench.result import Check, Figure, median, ms, percentile, ratio
from bench.scale import Scale
from lane_runner.board.model import NewTask, Outcome

TARGET = 0.200
VERIFIED = {"checks": ["true"], "review": "auto"}


@dataclass(frozen=True)
class Sample:
    """One task: answer → board, and the check's and reviewer's own time within it."""

    total: float
    own: float

    @property
    def runner(self) -> float:
        return self.total - self.own


def lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def check_seconds(lane: Lane, task_id: str) -> float:
    """The checks' own run time, from the evidence the completed event carries."""
    for event in lane.store.board("work").events(task_id):
        verification = (event.data.get("metadata") or {}).get("verification")
        if event.kind == "completed" and verification:
            return sum(c["seconds"] for r in verification["rounds"] for c in r["checks"])
    return 0.0


def sample(lane: Lane, ended_log: Path, task_id: str, verified: bool) -> Sample:
    [run] = [r for r in lane.store.board("work").runs(task_id) if r.outcome is Outcome.COMPLETED]
    assert run.ended_at is not None
    worktree = next(Path(s["cwd"]) for s in reversed(lane.starts()))
    ended = {e["pid"]: e["ended_at"] for e in lines(ended_log)}
    clis = [s for s in lane.starts() if Path(s["cwd"]) == worktree]
    answered = ended[clis[0]["pid"]]
    own = 0.0
    if verified:
        reviewer = clis[-1]
        own = ended[reviewer["pid"]] - reviewer["forked_at"] + check_seconds(lane, task_id)
    return Sample(run.ended_at - answered, own)


def run_round(root: Path, tasks: int, verified: bool) -> list[Sample]:
    ended_log = root.parent / f"{root.name}-ended.jsonl"
    lane = Lane(root, concurrency=1, env={"LANE_RUNNER_SIM_ENDED_LOG": str(ended_log)})
    if verified:
        with (root / "config.toml").open("a") as config:
            config.writelines(f"{key} = {toml_value(value)}\n" for key, value in VERIFIED.items())
    samples: list[Sample] = []
    try:
        lane.start()
        for index in range(tasks):
            task = lane.store.board("work").add_task(NewTask(
                title=f"verified {index}", body="bench", assignee=ASSIGNEE,
                workspace=str(lane.repo),
            ))
            lane.wait(lambda n=index: lane.done() > n, 120, f"task {index} to finish")
            samples.append(sample(lane, ended_log, task.id, verified))
    finally:
        lane.stop()
    return samples


def measure(scale: Scale, workdir: Path) -> Figure:
    plain: list[Sample] = []
    verified: list[Sample] = []
    per_round = max(1, scale.verify_tasks // scale.verify_rounds)
    for n in range(scale.verify_rounds):  # alternating, so drift falls on both alike
        plain += run_round(workdir / f"plain-{n}", per_round, False)
        verified += run_round(workdir / f"verified-{n}", per_round, True)
    base = median([s.total for s in plain])
    share = [s.runner for s in verified]
    figure = Figure(
        key="verify_cost",
        title="Checks and review overhead: completed answer → result on the board",
        baseline="the same daemon with no checks and no review, rounds alternating",
        columns=["setup", "tasks", "answer → board p50", "their own time p50",
                 "runner's share p50", "p90", "vs baseline"],
    )
    figure.rows = [
        ["no checks, no review", str(len(plain)), ms(base), "—", ms(base),
         ms(percentile([s.total for s in plain], 90)), "1.00×"],
        ["check `true` + simulated reviewer", str(len(verified)),
         ms(median([s.total for s in verified])), ms(median([s.own for s in verified])),
         ms(median(share)), ms(percentile(share, 90)), ratio(median(share), base)],
    ]
    figure.checks = [Check(
        "checks + review: runner's share ≤ 200 ms p50", ms(median(share)),
        median(share) <= TARGET,
    )]
    figure.notes.append(
        "Answer = the implementer CLI's exit; board = the run's ended_at; their own time = "
        "the check's seconds in the evidence + the reviewer CLI from fork (10 ms ticks) to "
        "exit. One task at a time, so no queue is measured."
    )
    return figure
