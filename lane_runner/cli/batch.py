"""``run --until-idle``: when a batch is over, what it did, and the exit status a script
reads from it.

The batch ends once nothing is ready or running, nor in a hosted board's review column
this runner serves (``IdleWatch``); tasks cooling down, held back by the storm breaker,
or whose review was just handed back without a verdict are not waited for, and are
remembered as left waiting.
What the batch did is then read from the boards: every task a run of this node claimed
since the batch started, by where it ended (done, blocked, gave up). The exit status:

- ``0``: every task the batch ran is done, and no work was left waiting;
- ``EXIT_BLOCKED`` (4): some task ended blocked or gave up (this wins over waiting);
- ``EXIT_WAITING`` (3): work was left waiting (cooling down, held by the breaker), as
  ``recover`` exits 3 when work must wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import closing
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from lane_runner import redact
from lane_runner.board import open_store
from lane_runner.board.base import Board, BoardUnavailable, HostedBoard
from lane_runner.board.model import BlockKind, Status, Task
from lane_runner.cli.output import print_json, print_table, printable
from lane_runner.config import Config
from lane_runner.run import lanereview
from lane_runner.service import breaker

if TYPE_CHECKING:
    from lane_runner.daemon import Daemon

log = logging.getLogger(__name__)

EXIT_DONE = 0
EXIT_WAITING = 3
EXIT_BLOCKED = 4

MEANINGS = {
    EXIT_DONE: "every task the batch ran is done and no work was left waiting",
    EXIT_BLOCKED: "some tasks ended blocked or gave up",
    EXIT_WAITING: "work was left waiting (cooling down or held by the storm breaker)",
}


@dataclass(frozen=True)
class Waiting:
    """A ready task the batch did not wait for, and why."""

    board: str
    task: str
    why: str


@dataclass
class IdleWatch:
    """The daemon's ``until``: True once nothing is ready or running anywhere; a board
    that cannot be read might still have work.

    A ready task cooling down (``next_attempt_at`` in the future) is not ready: a batch
    would otherwise wait out every capacity cooldown, up to ``cooldown_max`` each. Nor is
    one the storm breaker holds back (its workspace or board broken, no probe due): it
    waits for an operator, who would otherwise find the batch still running. Both are
    kept in ``waiting`` for the batch's report.
    """

    waiting: list[Waiting] = field(default_factory=list)
    reached: bool = False

    def __call__(self, daemon: Daemon) -> bool:
        if daemon.workers or daemon.pending_finalizations:
            return False
        found = self._waiting(daemon, time.time())
        if found is None:
            return False
        self.waiting, self.reached = found, True
        _log_waiting(found)
        return True

    @staticmethod
    def _waiting(daemon: Daemon, now: float) -> list[Waiting] | None:
        """The ready tasks not waited for, or None while some task is ready or running."""
        trips = daemon.services.breaker.trips()
        waiting: list[Waiting] = []
        try:
            for slug in daemon.services.store.board_slugs():
                board = daemon.services.store.board(slug)
                if isinstance(board, HostedBoard):
                    # Another program's board: its ready tasks of other lanes are not ours
                    # to judge, so only this runner's lanes count, cooling down or not.
                    counts = board.lane_counts(daemon.cfg.default_assignee)
                    resting = [Waiting(slug, task, "review handed back without a verdict")
                               for task in sorted(daemon.review_rests.resting(slug))]
                    reviews = counts.get("review", 0) if lanereview.serves(daemon.cfg, board) \
                        else 0
                    if counts.get("ready", 0) or counts.get("running", 0) \
                            or reviews > len(resting):
                        return None
                    waiting.extend(resting if reviews else [])
                    continue
                found = _board_waiting(board, slug, trips, now)
                if found is None:
                    return None
                waiting.extend(found)
        except BoardUnavailable:
            return None
        return waiting


def _board_waiting(
    board: Board, slug: str, trips: Mapping[str, breaker.Trip], now: float
) -> list[Waiting] | None:
    """A board's ready tasks not waited for (cooling down, or held by the storm breaker
    until a later probe), or None while one of its tasks is running or claimable."""
    counts = board.counts()
    if counts.get("running", 0):
        return None
    if not counts.get("ready", 0):
        return []
    waiting: list[Waiting] = []
    for task in board.list_tasks(Status.READY):
        if task.next_attempt_at is not None and task.next_attempt_at > now:
            left = task.next_attempt_at - now
            waiting.append(Waiting(slug, task.id, f"cooling down {left:.0f} s"))
            continue
        trip = breaker.holding(trips, slug, task.workspace)
        if trip is None or trip.probe_at <= now:
            return None
        waiting.append(Waiting(slug, task.id, f"held by the breaker ({trip.scope})"))
    return waiting


def _log_waiting(found: list[Waiting]) -> None:
    """Say which tasks the idle batch did not wait for, and why."""
    cooling = [w for w in found if w.why.startswith("cooling")]
    held = [w for w in found if not w.why.startswith("cooling")]
    if cooling:
        log.info("idle: %d task(s) cooling down, not waited for: %s", len(cooling),
                 ", ".join(f"{w.board}/{w.task} ({w.why})" for w in cooling))
    if held:
        log.warning(
            "idle: %d task(s) held back by the storm breaker, not waited for: %s "
            "('lane-runner health show')", len(held),
            ", ".join(f"{w.board}/{w.task} ({w.why})" for w in held),
        )


@dataclass(frozen=True)
class Ended:
    """A task the batch ran, where it ended."""

    board: str
    task: str
    title: str
    status: str
    kind: str | None = None
    reason: str | None = None


class Where(StrEnum):
    DONE = "done"
    BLOCKED = "blocked"
    GAVE_UP = "gave_up"
    OTHER = "other"
    """Ready again, running or archived by someone while the batch ended."""


@dataclass
class Report:
    """What a batch did: the tasks it ran by where they ended, the work it left waiting,
    and the boards it could not read back."""

    ended: dict[Where, list[Ended]] = field(default_factory=lambda: {w: [] for w in Where})
    waiting: list[Waiting] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.ended[Where.BLOCKED] or self.ended[Where.GAVE_UP]:
            return EXIT_BLOCKED
        if self.waiting:
            return EXIT_WAITING
        return EXIT_DONE

    def document(self) -> dict[str, Any]:
        code = self.exit_code
        return {
            "exit_code": code,
            "meaning": MEANINGS[code],
            "counts": {
                **{where.value: len(tasks) for where, tasks in self.ended.items()},
                "waiting": len(self.waiting),
            },
            **{where.value: [asdict(e) for e in tasks] for where, tasks in self.ended.items()},
            "waiting": [asdict(w) for w in self.waiting],
            "unreadable_boards": self.unreadable,
        }


def where(task: Task) -> Where:
    if task.status is Status.DONE:
        return Where.DONE
    if task.status is Status.BLOCKED:
        return Where.GAVE_UP if task.block_kind is BlockKind.GAVE_UP else Where.BLOCKED
    return Where.OTHER


def report(cfg: Config, node: str, started: float, waiting: list[Waiting]) -> Report:
    """What the batch that started at ``started`` on ``node`` did, read from the boards."""
    found = Report(waiting=list(waiting))
    with closing(open_store(cfg)) as store:
        for slug in store.board_slugs():
            try:
                board = store.board(slug)
                for task in board.list_tasks():
                    if task.updated_at < started or not any(
                        run.node == node and run.claimed_at >= started
                        for run in board.runs(task.id)
                    ):
                        continue
                    reason = redact.text(task.block_reason) if task.block_reason else None
                    kind = task.block_kind.value if task.block_kind else None
                    found.ended[where(task)].append(
                        Ended(slug, task.id, task.title, task.status.value, kind, reason)
                    )
            except BoardUnavailable as error:
                log.warning("board %s not read back for the batch's report: %s", slug, error)
                found.unreadable[slug] = redact.text(str(error))
    return found


def show(found: Report, as_json: bool) -> int:
    """Print what the batch did; its exit status."""
    if as_json:
        print_json(found.document())
        return found.exit_code
    counts = found.document()["counts"]
    print(f"batch: {counts['done']} done, {counts['blocked']} blocked, "
          f"{counts['gave_up']} gave up, {counts['waiting']} left waiting")
    stopped = found.ended[Where.BLOCKED] + found.ended[Where.GAVE_UP]
    if stopped:
        print_table(("board", "task", "status", "kind", "reason"),
                    [(e.board, e.task, e.status, e.kind, e.reason) for e in stopped])
    if found.waiting:
        print_table(("board", "task", "waiting"), [(w.board, w.task, w.why) for w in found.waiting])
    for slug, error in found.unreadable.items():
        print(f"board {slug} not read back: {printable(error)}")
    print(f"exit {found.exit_code}: {MEANINGS[found.exit_code]}")
    return found.exit_code
