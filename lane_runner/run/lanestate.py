"""The lane state file ``lanes/<board>/<task>.json`` (docs/ARCHITECTURE.md §3.2).

It is what a restarted runner needs to carry a task on: the route, the provider
that last worked on it and its session ids (so the same provider resumes and a
different one gets a handoff), the goal turn and the goal judge's rejections (so a
restarted goal carries on counting), the consecutive cooldowns (so a task cannot
cycle unseen, see ``cycling``) and the attempt sequence (so no candidate or
provider result file name is ever reused). The executor saves it
through the journal's atomic write at every step that matters for resume.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

import schemas
from journal import names as journal_names
from lane_runner import files
from lane_runner.run import cycling
from lane_runner.run import stage as stages
from lane_runner.run.stage import Move, Stage
from lane_runner.run.verification import Verification

log = logging.getLogger(__name__)

SCHEMA = "lane-state.schema.json"
MAX_ATTEMPTS_KEPT = 50
MAX_REJECTIONS_KEPT = 5
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Step:
    """One follow-up step of a delivery (``run/followup.py``): whether it ended, and what
    its comment reports (``said``)."""

    ended: bool
    said: str | None


@dataclass(frozen=True)
class Delivery:
    """An accepted result on its way to the board (``delivery`` in the lane state file,
    lane-state.schema.json): the run delivering it, the run whose answer it is, the
    result and its metadata, its ``stage`` and its follow-up ``steps``."""

    run: int
    accepted_run: int
    result: dict[str, Any]
    metadata: dict[str, Any]
    stage: Stage
    steps: dict[str, Step] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The file's form, in the order the runner has always written it (``steps``
        from the first step on), so a load and a save leave a file as it was."""
        document: dict[str, Any] = {
            "run": self.run,
            "accepted_run": self.accepted_run,
            "result": self.result,
            "metadata": self.metadata,
            "stage": self.stage.value,
        }
        if self.steps:
            document["steps"] = {name: asdict(step) for name, step in self.steps.items()}
        return document

    @classmethod
    def of(cls, document: dict[str, Any]) -> Delivery:
        """The record a (schema-checked) lane state file holds."""
        return cls(
            run=document["run"],
            accepted_run=document["accepted_run"],
            result=document["result"],
            metadata=document["metadata"],
            stage=Stage(document["stage"]),
            steps={name: Step(**step) for name, step in document.get("steps", {}).items()},
        )


@dataclass
class LaneState:
    board: str
    task_id: str
    run_id: int
    route: dict[str, Any] | None = None
    provider: str | None = None
    sessions: dict[str, str] = field(default_factory=dict)
    started: dict[str, bool] = field(default_factory=dict)
    told: dict[str, str] = field(default_factory=dict)
    """Per provider, the digest of the context its session was told (``context.told``)."""
    goal_turn: int = 0
    sequence: int = 0
    attempts: list[dict[str, Any]] = field(default_factory=list)
    updated_at: float = 0.0
    goal_rejections: list[str] = field(default_factory=list)
    cooldowns: int = 0
    cycles: list[dict[str, Any]] = field(default_factory=list)
    retry_reason: str | None = None
    base: str | None = None
    delivery: Delivery | None = None
    verification: Verification | None = None

    def to_document(self) -> dict[str, Any]:
        self.updated_at = time.time()
        return {
            "format": 1,
            "board": self.board,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "route": self.route,
            "provider": self.provider,
            "sessions": dict(self.sessions),
            "started": dict(self.started),
            "told": dict(self.told),
            "goal_turn": self.goal_turn,
            "sequence": self.sequence,
            "attempts": self.attempts[-MAX_ATTEMPTS_KEPT:],
            "updated_at": self.updated_at,
            "goal_rejections": self.goal_rejections[-MAX_REJECTIONS_KEPT:],
            "cooldowns": self.cooldowns,
            "cycles": self.cycles[-cycling.KEPT :],
            "retry_reason": self.retry_reason,
            "base": self.base,
            "delivery": None if self.delivery is None else self.delivery.to_dict(),
            "verification": None if self.verification is None else self.verification.to_dict(),
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> LaneState:
        return cls(
            board=document["board"],
            task_id=document["task_id"],
            run_id=document["run_id"],
            route=document["route"],
            provider=document["provider"],
            sessions=dict(document["sessions"]),
            started=dict(document.get("started", {})),
            told=dict(document.get("told", {})),
            goal_turn=document["goal_turn"],
            sequence=document["sequence"],
            attempts=list(document["attempts"]),
            updated_at=document["updated_at"],
            goal_rejections=list(document.get("goal_rejections", [])),
            cooldowns=document.get("cooldowns", 0),
            cycles=list(document.get("cycles", [])),
            retry_reason=document.get("retry_reason"),
            base=document.get("base"),
            delivery=None if document.get("delivery") is None else Delivery.of(
                document["delivery"]
            ),
            verification=None if document.get("verification") is None else Verification.of(
                document["verification"]
            ),
        )

    def next_sequence(self) -> int:
        """Reserve the next attempt number; the caller saves the state before using it."""
        self.sequence += 1
        return self.sequence

    def begin_run(self, run_id: int) -> None:
        """A new claim of the same task: sessions, sequence, goal turns and cycles carry over
        (a restart is not a fresh start); the route is chosen again."""
        if run_id != self.run_id:
            self.run_id = run_id
            self.route = None
            if self.stage() not in (None, Stage.ACCEPTED):
                self._move(Move.CLEAR)  # that result reached the journal: this run's is new

    def stage(self) -> Stage | None:
        """Where the accepted result the state holds stands (None: it holds none)."""
        return None if self.delivery is None else self.delivery.stage

    def accept(
        self, result: dict[str, Any], metadata: dict[str, Any], accepted_run: int | None = None
    ) -> None:
        """A result is accepted: kept here before its commit is made (``delivery``). Of this
        run, or of ``accepted_run``, whose commit on the task's branch carries it
        (``run/undelivered.py``): that run delivers it until another takes it up."""
        answering = self.run_id if accepted_run is None else accepted_run
        self._move(Move.ACCEPT, run=answering, accepted_run=answering, result=result,
                   metadata=metadata)

    def redeliverable(self) -> bool:
        """An earlier run's accepted result that never reached the journal (a crash came
        between its commit and its pending record): this run delivers it."""
        return (
            self.stage() is Stage.ACCEPTED
            and self.delivery is not None
            and self.delivery.run != self.run_id
        )

    def redeliver(self) -> None:
        """This run takes the earlier run's accepted result up, to deliver it as its own."""
        self._move(Move.REDELIVER, run=self.run_id)

    def journaled(self, metadata: dict[str, Any]) -> None:
        """The accepted result's pending record is durable, with what was committed."""
        self._move(Move.JOURNAL, metadata=metadata)

    def followed(self) -> None:
        """The board took the result, and the push and the after_done hook have run."""
        self._move(Move.FOLLOW)

    def delivered_elsewhere(self) -> None:
        """The board completed the task through another run: nothing is left to deliver."""
        self._move(Move.CLEAR)

    def _move(self, move: Move, **changes: Any) -> None:
        """The one way ``delivery`` changes: the stage table (``run/stage.py``) says whether
        ``move`` is legal from here, and where it leads."""
        to = stages.after(self.stage(), move)
        if to is None:
            self.delivery = None
        elif move is Move.ACCEPT:
            self.delivery = Delivery(**changes, stage=to)
        else:
            assert self.delivery is not None  # the stage table moves none from nothing
            self.delivery = replace(self.delivery, **changes, stage=to)

    def delivery_id(self) -> str:
        """``LANE_DELIVERY_ID``: the same for every try of one accepted result's follow-ups,
        on every restart (the board, task and answering run, and a digest of the answer)."""
        assert self.delivery is not None
        answer = orjson.dumps(self.delivery.result, option=orjson.OPT_SORT_KEYS)
        digest = hashlib.sha256(answer).hexdigest()[:16]
        return f"{self.board}/{self.task_id}/run-{self.delivery.accepted_run}/{digest}"

    def step(self, name: str) -> Step | None:
        """The journal of the follow-up step ``name`` (``run/followup.py``): None before it
        began; ``ended`` False while it began and never ended (it was cut short)."""
        assert self.delivery is not None
        return self.delivery.steps.get(name)

    def begin_step(self, name: str) -> None:
        self._record_step(name, Step(ended=False, said=None))

    def end_step(self, name: str, said: str | None) -> None:
        """The step ended; ``said`` is what a later comment of it reports (none: nothing)."""
        self._record_step(name, Step(ended=True, said=said))

    def _record_step(self, name: str, record: Step) -> None:
        assert self.delivery is not None
        steps = {**self.delivery.steps, name: record}
        self.delivery = replace(self.delivery, steps=steps)

    def reject(self, reason: str) -> None:
        """The goal judge turned a turn down; the latest rejections are kept for the judge."""
        self.goal_rejections = [*self.goal_rejections, reason[:1000]][-MAX_REJECTIONS_KEPT:]

    def restart_goal(self) -> None:
        """A person takes over (the task is blocked): after an unblock, the goal starts anew."""
        self.goal_turn = 0
        self.goal_rejections = []

    def failed(self, reason: str) -> None:
        """The run ended in a counted failure: the next attempt is told ``reason``."""
        self.retry_reason = reason[:1000]

    def take_retry_reason(self) -> str | None:
        """Why the previous run failed, once: the attempt that is told clears it."""
        reason, self.retry_reason = self.retry_reason, None
        return reason

    def cooled_down(self, cause: str, reason: str, at: float) -> None:
        self.cooldowns += 1
        self.cycles = [*self.cycles, cycling.cycle(cause, reason, at)][-cycling.KEPT :]

    def progressed(self) -> None:
        """The run ended other than in a cooldown: the cycling count starts again."""
        self.cooldowns = 0
        self.cycles = []


def path_for(lanes_dir: Path, task_id: str) -> Path:
    return lanes_dir / journal_names.lane_state(task_id)


def load(lanes_dir: Path, board: str, task_id: str, run_id: int) -> LaneState:
    """The saved state of a task for run ``run_id``, or a fresh one when there is none or
    it cannot be trusted.

    An untrusted state file costs only a session resume (the task starts its
    provider session afresh), so it is logged and replaced, never fatal.
    """
    state = saved(lanes_dir, board, task_id)
    if state is None:
        return LaneState(board, task_id, run_id)
    state.begin_run(run_id)
    return state


def saved(lanes_dir: Path, board: str, task_id: str) -> LaneState | None:
    """The task's state as saved, of the run that saved it; None when there is none or it
    cannot be trusted (logged)."""
    path = path_for(lanes_dir, task_id)
    try:
        raw = files.read(path, MAX_BYTES)
    except FileNotFoundError:
        return None
    except OSError as error:
        log.warning("lane state %s unreadable (%s); starting fresh", path, error)
        return None
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        log.warning("lane state %s is not JSON (%s); starting fresh", path, error)
        return None
    problem = schemas.first_error(SCHEMA, document)
    if problem is None and (document["board"], document["task_id"]) != (board, task_id):
        problem = "names another board or task"
    if problem is not None:
        log.warning("lane state %s is invalid (%s); starting fresh", path, problem)
        return None
    return LaneState.from_document(document)


def cycling_tasks(lanes_root: Path) -> list[LaneState]:
    """Every task whose latest runs ended in cooldowns, for ``status``: read-only, and a
    state file that cannot be trusted is simply not listed (``load`` logs why)."""
    found: list[LaneState] = []
    for board_dir in sorted(lanes_root.iterdir()) if lanes_root.is_dir() else []:
        for path in sorted(board_dir.glob("*.json")) if board_dir.is_dir() else []:
            parsed = journal_names.parse(path.name)
            if parsed.kind is not journal_names.Kind.LANE_STATE or parsed.task_id is None:
                continue
            state = load(board_dir, board_dir.name, parsed.task_id, 1)
            if state.cooldowns:
                found.append(state)
    return found

