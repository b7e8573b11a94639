"""What a waste pass runs (pure): the tasks' scripted steps and the seed's faults."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

#: The CLIs the tasks alternate between: the two every real lane has.
PROVIDERS = ("codex", "claude")
#: A word in every scripted tool command, so the harness can find a tool that runs.
TOOL_MARK = "waste-tool"


class Fault(StrEnum):
    DAEMON = "daemon kill -9"
    CLI = "CLI kill -9 mid tool call"
    POSTGRES = "PostgreSQL restart"


@dataclass(frozen=True)
class Size:
    """How big a waste run is: tasks per pass, daemon kills, tool steps per task and how
    long each tool runs (the window a fault can land in)."""

    tasks: int
    daemon_kills: int
    tools: int
    tool_seconds: float


FULL = Size(tasks=20, daemon_kills=8, tools=3, tool_seconds=1.5)
SMOKE = Size(tasks=2, daemon_kills=1, tools=2, tool_seconds=1.0)


@dataclass(frozen=True)
class Step:
    """One fault, ``wait`` after the previous one (a fraction of the calm pass's length
    divided among the faults: the moments spread over the run)."""

    fault: Fault
    wait: float


def faults(seed: int, size: Size) -> list[Step]:
    """The seed's faults in the order they land: the daemon kills, one CLI kill and one
    PostgreSQL restart shuffled, each after a random share of the run."""
    rng = random.Random(seed)
    kinds = [Fault.DAEMON] * size.daemon_kills + [Fault.CLI, Fault.POSTGRES]
    rng.shuffle(kinds)
    return [Step(kind, rng.uniform(0.2, 1.0)) for kind in kinds]


def provider(index: int) -> str:
    return PROVIDERS[index % len(PROVIDERS)]


def file_name(step: int) -> str:
    return f"step-{step}.txt"


def steps(size: Size, summary: str) -> list[dict[str, Any]]:
    """A task's script: ``tools`` shell commands, each running ``tool_seconds`` and then
    writing its file, then the answer naming the files."""
    tools: list[dict[str, Any]] = [
        {"shell": f": {TOOL_MARK}; sleep {size.tool_seconds:g}; echo {n} > {file_name(n)}"}
        for n in range(size.tools)
    ]
    answer = {"status": "completed", "summary": summary,
              "changed_files": [file_name(n) for n in range(size.tools)],
              "tests_run": [], "artifacts": [], "findings": [], "blockers": []}
    return [*tools, {"answer": answer}]
