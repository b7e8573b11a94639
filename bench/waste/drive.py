"""One waste pass: the same tasks, calm or under the seed's faults, and what it cost."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from bench.waste import plan, tally
from bench.waste.plan import Fault, Size
from bench.waste.site import Lane, ModelServer, Postgres

log = logging.getLogger(__name__)

DONE_TIMEOUT = 1200.0
"""Seconds a pass may take before it is given up (and reported unfinished)."""
TOOL_TIMEOUT = 120.0
"""Seconds to wait for a tool to be running, for the CLI kill."""


class Mode(StrEnum):
    CALM = "calm"
    FAULTS = "faults"
    SCRATCH = "restart from scratch"


@dataclass
class Pass:
    mode: Mode
    cost: tally.Cost
    seconds: float
    faults: list[str] = field(default_factory=list)
    sessions_forgotten: int = 0


def run(root: Path, postgres: Postgres, server: ModelServer, mode: Mode, size: Size,
        seed: int, spread: float) -> Pass:
    """Run ``size.tasks`` tasks through one daemon home until all are done. Under faults
    the seed's faults land ``spread`` seconds apart on average (the calm pass's length
    shared among them); in ``SCRATCH`` every restart forgets the CLI sessions."""
    board = mode.name.lower()
    lane = Lane(root / board, board, postgres.url(), server)
    tag = uuid.uuid4().hex[:6]
    markers = [f"waste-{board}-{index}-{tag}" for index in range(size.tasks)]
    server.script_many({m: {name: plan.steps(size, f"wrote the files of {m}")
                       for name in plan.PROVIDERS} for m in markers})
    ids = {lane.add(m, f"cli-{plan.provider(i)}-low"): m for i, m in enumerate(markers)}
    started = time.monotonic()
    done = Pass(mode, tally.count([], [], []), 0.0)
    try:
        lane.start()
        if mode is not Mode.CALM:
            for step in plan.faults(seed, size):
                if lane.done() >= size.tasks:
                    break
                time.sleep(step.wait * spread)
                done.faults.append(_fault(lane, postgres, step.fault, mode, done, size.tasks))
        _wait_done(lane, size.tasks, started)
    finally:
        seconds = time.monotonic() - started
        lane.stop()
        accepted = _accepted(lane, ids)
        lane.close()
    done.cost = tally.count(server.requests(), markers, accepted)
    done.seconds = seconds
    return done


def _fault(lane: Lane, postgres: Postgres, fault: Fault, mode: Mode, done: Pass,
           tasks: int) -> str:
    """Make one fault happen; what happened, for the report."""
    if fault is Fault.DAEMON:
        lane.kill()
        if mode is Mode.SCRATCH:
            done.sessions_forgotten += lane.forget_sessions()
        lane.start()
        return fault.value
    if fault is Fault.POSTGRES:
        postgres.restart()
        return fault.value
    deadline = time.monotonic() + TOOL_TIMEOUT
    while time.monotonic() < deadline and lane.done() < tasks:
        if lane.kill_a_tool_cli():
            return fault.value
        time.sleep(0.05)
    return f"{fault.value}: no tool was running"


def _wait_done(lane: Lane, tasks: int, started: float) -> None:
    while lane.done() < tasks:
        if time.monotonic() - started > DONE_TIMEOUT:
            log.warning("waste pass gave up with %d of %d done", lane.done(), tasks)
            return
        if lane.daemon is not None and lane.daemon.poll() is not None:
            raise RuntimeError("the daemon exited:\n"
                               + lane.log()[-3000:].decode(errors="replace"))
        time.sleep(0.2)


def _accepted(lane: Lane, ids: dict[str, str]) -> list[tally.Accepted]:
    board = lane.store.board(lane.board_name)
    found = []
    for task_id, marker in ids.items():
        completions = [e for e in board.events(task_id) if e.kind in ("completed", "replayed")]
        if completions:
            found.append(tally.Accepted(marker, min(e.at for e in completions), len(completions)))
    return found
