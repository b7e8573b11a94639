"""One claimed run, as every room of it reads it (docs/ARCHITECTURE.md §1): the claim,
its board, its lane state, its deadline, its cancel event, where it works, and how it
ended (``RunEnd``, ``RunReport``, the daemon's and the metrics' one vocabulary).

The rooms of a run (``goal``, ``attempt``, ``routing``, ``lease``, ``endings``,
``accepted``, ``spending``, ``notebook``, ``workplace``) share this record instead of
one object holding every step; each keeps the few facts only it changes.

A run's settings are the ``Config`` in force when it was claimed (``cfg``): a reload
(SIGHUP, or the configuration file's change) swaps ``Services.cfg`` for the claims after
it, and the rooms read ``cfg`` here, so one run never mixes two configurations
(docs/configuration.md, "What a reload changes").
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
from lane_runner.run import lanestate, workspace
from lane_runner.service.services import Services


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
    the run was claimed under, the one its rooms read to its end."""

    s: Services
    cfg: Config
    task: Task
    run: Run
    board: Board
    state: lanestate.LaneState
    deadline: float  # on this node's monotonic clock: the task's max_runtime from the claim
    cancel: threading.Event  # shutdown, or an operator's stop
    worktree: Path = Path()
    cwd: Path = Path()  # where the CLI works (in the worktree)
    branch: str = ""  # the task's branch as git has it (it may differ from the default name)
    on_branch: bool = False  # the worktree is ours, on the task's branch (not a hosted one)
    turn_begun: bool = False  # a goal turn of this run has begun (a cooldown gives it back)
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, services: Services, claim: Claim, cfg: Config) -> Claimed:
        task = claim.task
        max_runtime = task.max_runtime or cfg.max_runtime
        return cls(
            services,
            cfg,
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
