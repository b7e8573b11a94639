"""Continuation turns (issue 46): prompt tokens per continuation turn vs the first turn.

Goal tasks of three turns (the simulated codex answers incomplete twice) run on a daemon;
each turn after the first resumes the task's session. What each turn was told is read
from the simulated CLI's own session store (``play.Sessions`` keeps every prompt it got).

The baseline is the whole-prompt design this replaced (every turn resent the task context,
the rules and the contract, ``run/context.worker_prompt``), rebuilt for the same turns
from what they were told: the first turn's context with each continuation's own words.

Tokens are estimated as word and punctuation pieces (``\\w+|[^\\w\\s]``), about what a
BPE tokenizer makes of English prose; the ratio is the figure, not the count.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.lane import Lane
from bench.result import Check, Figure, median
from bench.scale import Scale
from lane_runner.board.model import NewTask
from lane_runner.run import context as contexts

TARGET = 0.5
TURNS = 3
_PIECE = re.compile(r"\w+|[^\w\s]")
#: A task of the size a real one has: a few paragraphs saying what, where and how to check.
BODY = """The export command writes one CSV per board, but a board with more than 10,000
tasks takes minutes and holds the whole board in memory. Rewrite `lane_runner/cli/export.py`
so it streams: read the tasks in pages of 500 (the board's `list_tasks(after=...)`), write
each row as it is read, and flush every page. Keep the columns and their order exactly as
they are today; the web console's download link uses the same writer and must keep working.

Acceptance:
- `lane-runner export --board main --out tasks.csv` on a board of 100,000 tasks finishes in
  under 30 s and stays under 100 MB RSS (there is a generator in `bench/board_size.py`).
- `tests/operator/test_export.py` passes, and a new test covers a board of three pages,
  including a task whose body holds a newline, a quote and a comma.
- `--json` still prints one JSON object per task on its own line.

Context: issue 31 reported the memory use; the console's export went through the same path.
Do not change the board interface: `list_tasks` already takes `after` and `limit`. If the
SQLite backend needs an index for the paging query, add it in a migration step, as
`board/sql/migrations.py` does for the others. [sim:goal:3]"""


def tokens(text: str) -> int:
    return len(_PIECE.findall(text))


def told(root: Path) -> list[list[str]]:
    """Every session's prompts, as the simulated CLIs kept them."""
    return [json.loads(path.read_text())["prompts"]
            for path in sorted(root.rglob("sim-sessions/*.json"))]


def whole_design(first: str, resumed: str) -> str:
    """What the whole-prompt design told the same turn: the context again, then the same
    continuation, the rules and the contract."""
    context = first.split("\n\n" + contexts.OPERATING_RULES)[0]
    said = resumed.removeprefix("## Continue\n").split("\n\n" + contexts.RESULT_INSTRUCTIONS)[0]
    return contexts.worker_prompt(context, continuation=said)


def run_tasks(root: Path, count: int) -> list[list[str]]:
    lane = Lane(root, concurrency=2)
    try:
        lane.start()
        for index in range(count):
            lane.store.board("work").add_task(NewTask(
                title=f"Stream the CSV export ({index})", body=BODY,
                assignee="cli-codex-medium", workspace=str(lane.repo), goal_turns=TURNS,
            ))
        lane.wait(lambda: lane.done() >= count, 60 + 30 * count, f"{count} goal tasks")
    finally:
        lane.stop()
    return told(root)


def measure(scale: Scale, workdir: Path) -> Figure:
    sessions = run_tasks(workdir / "lane", scale.turn_tasks)
    assert sessions and all(len(s) == TURNS for s in sessions), [len(s) for s in sessions]
    first = [tokens(s[0]) for s in sessions]
    later = [tokens(p) for s in sessions for p in s[1:]]
    before = [tokens(whole_design(s[0], p)) for s in sessions for p in s[1:]]
    now, then = median(later) / median(first), median(before) / median(first)
    figure = Figure(
        key="turns",
        title=f"Continuation turns: prompt tokens per turn, goal tasks of {TURNS} turns",
        baseline="the whole-prompt design (every turn resent the task), for the same turns",
        columns=["design", "tasks", "first turn p50", "continuation turn p50", "vs first turn"],
        rows=[
            ["resumed turns told what is new", str(len(sessions)), f"{median(first):.0f}",
             f"{median(later):.0f}", f"{now:.2f}×"],
            ["whole prompt every turn (before)", str(len(sessions)), f"{median(first):.0f}",
             f"{median(before):.0f}", f"{then:.2f}×"],
        ],
    )
    figure.checks = [Check("continuation turn ≤ 0.5 × the first turn's prompt tokens",
                           f"{now:.2f}× (before: {then:.2f}×)", now <= TARGET)]
    figure.notes.append(
        "What each turn was told is read from the simulated codex's session store; tokens "
        "are word and punctuation pieces. The task body is "
        f"{tokens(BODY)} such pieces; the continuation says why the answer was not accepted "
        "and lists the branch's commits. What the model bills a resumed session for its "
        "history is the CLI's and the model's (prompt caching), the same in both designs."
    )
    return figure
