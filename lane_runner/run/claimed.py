"""One claimed run, as every room of it reads it (docs/ARCHITECTURE.md §1): the claim,
its board, its lane state, its deadline, its cancel event, where it works, and how it
ended (``RunEnd``, ``RunReport``, the daemon's and the metrics' one vocabulary).

The rooms of a run (``goal``, ``attempt``, ``routing``, ``lease``, ``endings``,
``accepted``, ``spending``, ``notebook``, ``workplace``) share this record instead of
one object holding every step; each keeps the few facts only it changes.

A run's settings are the ``Config`` in force when it was claimed (``cfg``), its typed
slices (``settings``, ``run/slices.py``) and the router, the judge and the CLIs built
from it (``tools``): a reload (SIGHUP, or the configuration file's change) swaps
``Services.cfg`` and its tools for the claims after it, and the rooms read ``settings``,
``cfg`` and ``tools`` here, so one run never mixes two configurations; what a reload
does change under it is ``slices.READ_LIVE`` (docs/configuration.md, "What a reload
changes"). A room reads ``settings``; ``cfg`` is left to the policies that resolve
per board and per provider (the workflow, the review's route, a CLI's plan).
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from lane_runner.board.base import Board
from lane_runner.board.model import Claim, Run, Task
from lane_runner.config import Config
from lane_runner.run import lanestate, snapshot, workspace
from lane_runner.run.slices import RunSettings
from lane_runner.service.services import Services, Tools


class RunEnd(enum.StrEnum):
    """How a run ended, as the daemon and the metrics see it (one vocabulary).

    The journal's outcomes keep their names (``committed``, ``conflict``, ``absent``,
    ``invalid``, ``pending``); the rest say what the board was told.
    """

    COMMITTED = "committed"
    CONFLICT = "conflict"
    ABSENT = "absent"
    INVALID = "invalid"
    PENDING = "pending"  # accepted, waiting in the journal for its board
    BLOCK = "block"
    COOLDOWN = "cooldown"
    RETRY = "retry"  # a counted failure, back to ready
    ABANDON = "abandon"  # left claimed (shutdown, lease lost, board away)
    STOPPED = "stopped"  # an operator's task stop
    REVIEWED = "reviewed"  # a host's review run ended in a verdict


@dataclass
class RunReport:
    board: str
    task_id: str
    run_id: int
    ended: RunEnd
    reason: str
    provider: str | None = None


@dataclass
class Claimed:
    """The run's facts; ``worktree``, ``cwd``, ``branch`` and ``on_branch`` are set once its
    workspace is prepared, ``turn_begun`` by the goal loop. ``cfg`` is the configuration
    the run was claimed under, ``settings`` its slices the rooms read to its end, and
    ``tools`` the router, judge and CLIs built from it."""

    s: Services
    cfg: Config
    settings: RunSettings
    tools: Tools
    task: Task
    run: Run
    board: Board
    state: lanestate.LaneState
    deadline: float  # on this node's monotonic clock: the task's max_runtime from the claim
    cancel: threading.Event  # shutdown, or an operator's stop
    worktree: Path = Path()
    cwd: Path = Path()  # where the CLI works (in the worktree)
    branch: str = ""  # the task's branch as git has it (it may differ from the default name)
    on_branch: bool = False  # on the task's branch (ours, or the one a host names): commit there
    turn_begun: bool = False  # a goal turn of this run has begun (a cooldown gives it back)
    staged: snapshot.Staged | None = None  # the reviewer's staging, for the result's commit
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def of(
        cls, services: Services, claim: Claim, cfg: Config, tools: Tools | None = None
    ) -> Claimed:
        """``tools``: the ones held for the run at its claim; by default those in force."""
        task = claim.task
        settings = RunSettings.of(cfg)
        max_runtime = task.max_runtime or settings.max_runtime
        return cls(
            services,
            cfg,
            settings,
            tools or services.tools(),
            task,
            claim.run,
            services.store.board(task.board),
            lanestate.load(services.home.lane_dir(task.board), task.board, task.id, claim.run.id),
            time.monotonic() + max_runtime,
            services.run_cancel(claim.run.id),
            branch=workspace.branch_name(task.board, task.id),
        )

    def report(self, ended: RunEnd, reason: str, provider: str | None = None) -> RunReport:
        return RunReport(self.task.board, self.task.id, self.run.id, ended, reason, provider)

    def goal_words(self, turn: int) -> str:
        """``, goal turn 2/4`` in what people read; nothing for a task of one turn, whose
        attempts are no turns of a goal however many runs it took."""
        goal_turns = self.task.goal_turns
        return f", goal turn {turn}/{goal_turns}" if goal_turns > 1 else ""

    def holds_result(self) -> bool:
        """Whether the journal holds this run's accepted result, not yet on the board."""
        return self.s.holds_result(self.task.board, self.task.id, self.run.id)
