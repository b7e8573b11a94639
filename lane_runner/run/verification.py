"""A completed answer on its way through acceptance checks and review, as the lane state
keeps it (``verification`` in ``lanes/<board>/<task>.json``, docs/verification.md).

Every step's outcome is saved here before the next step starts, so a runner killed in
the middle repeats only the step it was in: checks that were running run again, a
review that was running is asked again, a verdict once saved is never asked for again,
and feedback once saved is the next turn's whatever happens. Each turn and round is
counted in the same save that records why it is taken, so it counts once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from lane_runner.usage.record import Role

#: An attempt's role (``usage/record.py``): in its lane state record and its ledger records.
IMPLEMENT, REVIEW = Role.IMPLEMENT, Role.REVIEW


class Phase(StrEnum):
    CHECKING = "checking"  # the answer's acceptance checks run (again, after a crash)
    REVIEWING = "reviewing"  # its checks passed; the reviewer is asked (again, after a crash)
    FEEDBACK = "feedback"  # checks failed or changes were asked: the implementer is told
    APPROVED = "approved"  # passed: the answer is accepted, never checked or asked again


@dataclass(frozen=True)
class CheckRun:
    """One acceptance check as it ran: its command, exit code (None: killed at its
    deadline or never started), how it ended, how long it took and its output's tail."""

    command: str
    exit_code: int | None
    ended: str
    seconds: float
    tail: str

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "exit_code": self.exit_code, "ended": self.ended,
                "seconds": round(self.seconds, 3), "tail": self.tail}

    @classmethod
    def of(cls, document: dict[str, Any]) -> CheckRun:
        return cls(str(document["command"]), document.get("exit_code"),
                   str(document.get("ended", "")), float(document.get("seconds", 0.0)),
                   str(document.get("tail", "")))


@dataclass(frozen=True)
class Finding:
    """One thing a reviewer found: where (a file and line; empty and 0 for the whole
    change), how bad, and what."""

    file: str
    line: int
    severity: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "severity": self.severity,
                "text": self.text}

    @classmethod
    def of(cls, document: dict[str, Any]) -> Finding:
        return cls(str(document.get("file", "")), int(document.get("line", 0)),
                   str(document.get("severity", "")), str(document.get("text", "")))

    def where(self) -> str:
        if not self.file:
            return "(the change)"
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class Verdict:
    """A reviewer's answer (``schemas/review-result.schema.json``) and who gave it."""

    reviewer: str
    model: str
    verdict: str  # approve | request_changes
    summary: str
    findings: tuple[Finding, ...] = ()

    @property
    def approved(self) -> bool:
        return self.verdict == "approve"

    def to_dict(self) -> dict[str, Any]:
        return {"reviewer": self.reviewer, "model": self.model, "verdict": self.verdict,
                "summary": self.summary, "findings": [f.to_dict() for f in self.findings]}

    @classmethod
    def of(cls, document: dict[str, Any]) -> Verdict:
        return cls(str(document["reviewer"]), str(document.get("model", "")),
                   str(document["verdict"]), str(document.get("summary", "")),
                   tuple(Finding.of(f) for f in document.get("findings", [])))

    @classmethod
    def answered(cls, reviewer: str, model: str, answer: dict[str, Any]) -> Verdict:
        """The verdict of a reviewer's schema-valid answer."""
        return cls(reviewer, model, answer["verdict"], answer["summary"],
                   tuple(Finding.of(f) for f in answer["findings"]))


@dataclass(frozen=True)
class Round:
    """One answer's verification: its checks and the verdict on it (None: not reviewed)."""

    checks: tuple[CheckRun, ...] = ()
    verdict: Verdict | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"checks": [c.to_dict() for c in self.checks],
                "verdict": None if self.verdict is None else self.verdict.to_dict()}

    @classmethod
    def of(cls, document: dict[str, Any]) -> Round:
        verdict = document.get("verdict")
        return cls(tuple(CheckRun.of(c) for c in document.get("checks", [])),
                   None if verdict is None else Verdict.of(verdict))


#: Rounds kept in the lane state: the latest ones (a task may take many answers).
MAX_ROUNDS_KEPT = 12
#: How much of each check's output tail the accepted result's evidence keeps.
EVIDENCE_TAIL_CHARS = 2000


@dataclass(frozen=True)
class Verification:
    """The answer being verified, the route that gave it, where it stands, the turns and
    rounds fed back so far, every answer's round of evidence (the latest last) and, in
    ``FEEDBACK``, what the implementer is told next."""

    phase: Phase
    answer: dict[str, Any]
    route: dict[str, Any]
    check_turns: int = 0
    review_rounds: int = 0
    rounds: tuple[Round, ...] = field(default_factory=tuple)
    feedback: str = ""

    @property
    def latest(self) -> Round:
        return self.rounds[-1] if self.rounds else Round()

    def next_answer(self, answer: dict[str, Any], route: dict[str, Any]) -> Verification:
        """A new answer to check, the counts and the evidence so far carried on."""
        rounds = (*self.rounds, Round())[-MAX_ROUNDS_KEPT:]
        return replace(self, phase=Phase.CHECKING, answer=answer, route=route,
                       rounds=rounds, feedback="")

    def checked(self, runs: tuple[CheckRun, ...]) -> Verification:
        return self._latest(replace(self.latest, checks=runs))

    def reviewed(self, verdict: Verdict) -> Verification:
        return self._latest(replace(self.latest, verdict=verdict))

    def _latest(self, latest: Round) -> Verification:
        return replace(self, rounds=(*self.rounds[:-1], latest))

    def evidence(self) -> dict[str, Any]:
        """What the accepted result's metadata carries of its verification: every round's
        checks (their output's tail cut to ``EVIDENCE_TAIL_CHARS``: the journal's record
        is bounded) and verdict, and the turns and rounds fed back."""
        rounds = [
            replace(r, checks=tuple(replace(c, tail=c.tail[-EVIDENCE_TAIL_CHARS:])
                                    for c in r.checks))
            for r in self.rounds
        ]
        return {"check_turns": self.check_turns, "review_rounds": self.review_rounds,
                "rounds": [r.to_dict() for r in rounds]}

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase.value, "answer": self.answer, "route": self.route,
                "check_turns": self.check_turns, "review_rounds": self.review_rounds,
                "rounds": [r.to_dict() for r in self.rounds], "feedback": self.feedback}

    @classmethod
    def of(cls, document: dict[str, Any]) -> Verification:
        return cls(Phase(document["phase"]), dict(document["answer"]),
                   dict(document["route"]), int(document.get("check_turns", 0)),
                   int(document.get("review_rounds", 0)),
                   tuple(Round.of(r) for r in document.get("rounds", [])),
                   str(document.get("feedback", "")))


def first(answer: dict[str, Any], route: dict[str, Any]) -> Verification:
    """The first answer of a task to verify."""
    return Verification(Phase.CHECKING, answer, route, rounds=(Round(),))
