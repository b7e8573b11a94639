"""The lane's reviewer on a host's review column (issue 42, docs/hermes.md): a claimed
review of a hosted board (Hermes's ``review``) answered by our reviewer CLI, the
verify-and-review issue's review run (``run/review.py``) made for a task whose result
the host already holds.

The review run is a run like any other of the task: its rooms are the executor's
(``Claimed``, ``Notebook``, ``Spending``, ``Lease``, ``Attempts``, ``Workplace``), so it
works in the host's workspace for the task (the implementer's commit is on its branch),
its CLI goes through the same supervised provider request with the review run's
heartbeat keeping its lease, and its usage is recorded under the role ``review``. Who
reviews is ``verifying.choose_reviewer``'s word: ``auto`` is a usable provider other
than the one that implemented the task (its last implementing attempt in the lane
state). A board whose ``review`` is set ``off`` leaves its column to someone else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lane_runner.board.base import Board, BoardUnavailable, ReviewColumn, WorkspaceUnusable
from lane_runner.board.model import Claim, Implemented, ReviewVerdict, Task
from lane_runner.config import Config
from lane_runner.names import PROVIDERS
from lane_runner.providers import Classification
from lane_runner.run import command, hostedfollow, plan, review, reviewcolumn, verifying, workspace
from lane_runner.run.attempt import Attempts
from lane_runner.run.claimed import Claimed, RunEnd, RunReport
from lane_runner.run.hooks import EVERY_BOARD
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.reviewcolumn import ReviewFailed, ReviewRequest
from lane_runner.run.spending import Spending
from lane_runner.run.verification import IMPLEMENT, REVIEW, Verdict
from lane_runner.run.workplace import Workplace
from lane_runner.service.services import Services, Tools

#: What a board's ``review`` setting means for its host's column when it names none: the
#: task asked for a review, so one is given.
COLUMN_DEFAULT = "auto"


def serves(cfg: Config, board: Board) -> bool:
    """Whether this runner reviews ``board``'s review column: a host's board with one,
    whose ``review`` setting is not ``off``."""
    return isinstance(board, ReviewColumn) and column_review(cfg, board.slug) != "off"


def column_review(cfg: Config, slug: str) -> str:
    """Who reviews the column of board ``slug``: its ``review`` setting, ``auto`` unset."""
    return cfg.review.get(slug, cfg.review.get(EVERY_BOARD, COLUMN_DEFAULT))


def claim(services: Services, slug: str, rests: Rests, busy: set[str]) -> Claim | None:
    """A review of our lanes on board ``slug``'s column, when this runner serves it,
    claimed as its host claims one; tasks in ``busy`` (their implementer's run still in a
    slot) and those whose review rests are passed over."""
    board = services.store.board(slug)
    if not serves(services.cfg, board):
        return None
    assert isinstance(board, ReviewColumn)
    return board.claim_review(services.node, services.cfg.lease_ttl,
                              frozenset(busy | rests.resting(slug)))


def serve(services: Services, claim: Claim, cfg: Config, tools: Tools) -> RunReport:
    """The claimed review answered by the lane's reviewer and its verdict carried out;
    the implementer's follow-ups this runner still owes run first (``run/hostedfollow.py``):
    while they cannot, the review gives no verdict and the task waits in review."""
    reviewer = LaneReviewer(services, claim, cfg, tools)
    board = reviewer.c.board
    assert isinstance(board, ReviewColumn)  # ``serves`` let only such boards' claims in
    try:
        reviewed = reviewcolumn.serve(board, claim, reviewer)
    finally:
        services.forget_run(claim.run.id)
    if reviewed.verdict is None:  # the task waits in review: the daemon rests it a while
        return reviewer.c.report(RunEnd.COOLDOWN, "no verdict: back in review",
                                 reviewer.provider)
    said = "approved" if reviewed.verdict.approved else "changes requested"
    return reviewer.c.report(RunEnd.REVIEWED, f"{said}: {reviewed.verdict.summary}",
                             reviewer.provider)


def reviewed(diffstat: str, base: str | None) -> str:
    """What the reviewer was shown, for the run's comment: the change's size since its
    base (the diff stat's last line), or that there was none to show."""
    if not diffstat or base is None:
        return "no change to show"
    return f"{diffstat.splitlines()[-1].strip()} since {base[:12]}"


@dataclass
class Rests:
    """Reviews handed back without a verdict, by (board, task): not claimed again before
    their monotonic time (the daemon's ``cooldown_base``), so a reviewer that cannot
    answer is no loop, and ``run --until-idle`` lists them as waiting."""

    until: dict[tuple[str, str], float] = field(default_factory=dict)

    def rest(self, task: Task, seconds: float) -> None:
        self.until[(task.board, task.id)] = time.monotonic() + seconds

    def resting(self, slug: str) -> set[str]:
        """Board ``slug``'s tasks whose review rests now (those rested out are forgotten)."""
        now = time.monotonic()
        self.until = {key: at for key, at in self.until.items() if at > now}
        return {task for board, task in self.until if board == slug}


class LaneReviewer:
    """A ``reviewcolumn.Reviewer`` for one claimed review run."""

    def __init__(self, services: Services, claim: Claim, cfg: Config, tools: Tools) -> None:
        self.c = c = Claimed.of(services, claim, cfg, tools)
        self.notebook, spending = Notebook(c), Spending(c)
        self.lease = Lease(c, self.notebook, spending)
        self.attempts = Attempts(c, self.notebook, spending, self.lease)
        self.workplace = Workplace(c, self.notebook)
        self.provider: str | None = None  # the reviewer's, once chosen

    def __call__(self, request: ReviewRequest) -> ReviewVerdict:
        try:
            return self._review()
        except (OSError, BoardUnavailable, WorkspaceUnusable, workspace.WorkspaceError,
                command.Cancelled) as error:
            raise ReviewFailed(f"{type(error).__name__}: {error}") from error

    def _review(self) -> ReviewVerdict:
        c = self.c
        if not hostedfollow.before_run(c.s, c.board, c.task):
            raise ReviewFailed("the implementer's result still owes its follow-ups (its push, "
                               "after_done): reviewed once they ended")
        self.workplace.prepare()
        implemented = self._implementer()
        unusable = review.unusable(c.s.home, c.tools.binaries, time.time())
        chosen = verifying.choose_reviewer(
            column_review(c.cfg, c.task.board), implemented.provider, PROVIDERS, unusable)
        if chosen is None or chosen not in PROVIDERS:
            raise ReviewFailed(f"no usable provider to review ({chosen or 'none usable'})")
        self.provider = chosen
        route = review.route_for(c.cfg, chosen, implemented.effort)
        change = review.change_since(c.worktree, implemented.base, c.settings.worker.user)
        summary = str((c.task.result or {}).get("summary", ""))
        asked = review.prompt(plan.task_context(c.board, c.task), summary, change.stat,
                              change.diff, ())
        attempt = self.attempts.attempt(route, asked, c.cwd, c.state.goal_turn, role=REVIEW)
        if attempt.classification is not Classification.OK or attempt.structured is None:
            raise ReviewFailed(f"the reviewer ({chosen}) gave no verdict: {attempt.reason}")
        verdict = Verdict.answered(chosen, route.model, attempt.structured)
        self.notebook.note(
            f"review by {chosen}/{route.model} of {reviewed(change.stat, implemented.base)}: "
            f"{verdict.verdict}"
        )
        return ReviewVerdict(
            verdict.approved, verdict.summary,
            tuple(f"[{f.severity}] {f.where()}: {f.text}" for f in verdict.findings),
        )

    def _implementer(self) -> Implemented:
        """The implementer's provider, effort and base as the board recorded them with its
        result, so a runner that did not implement the task (no lane state of it, its
        worktree's head the implementer's commit) still asks another provider and shows
        the change; else the lane state's last implementing attempt; else none known."""
        board = self.c.board
        assert isinstance(board, ReviewColumn)
        recorded = board.implemented(self.c.task.id)
        if recorded is not None:
            return Implemented(recorded.provider, recorded.effort,
                               recorded.base or self.c.state.base)
        for record in reversed(self.c.state.attempts):
            if record.get("role", IMPLEMENT) == IMPLEMENT:
                return Implemented(str(record["provider"]), str(record.get("effort") or "medium"),
                                   self.c.state.base)
        return Implemented("", "medium", self.c.state.base)
