"""What a completed answer's checks and review mean (pure, beside ``decide``):
another turn told why, a block, the review, or acceptance (docs/verification.md).

Kept apart from the effects (``checks``, ``review``, ``verifier``) so each row is tested
cheaply; the verifier only carries these decisions out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lane_runner import redact
from lane_runner.board.model import BlockKind
from lane_runner.config import Config
from lane_runner.run.delivery import printable
from lane_runner.run.hooks import EVERY_BOARD
from lane_runner.run.verification import CheckRun, Phase, Verdict

#: How much of a failing check's output tail the implementer is told, per check.
FED_TAIL_CHARS = 4000


@dataclass(frozen=True)
class Policy:
    """What verifies a task's answers: the checks, who reviews (``off``, ``auto`` or a
    provider) and how many turns and rounds are fed back before the task is blocked."""

    checks: tuple[str, ...] = ()
    review: str = "off"
    check_turns: int = 3
    review_rounds: int = 2
    check_timeout: float = 600.0

    @property
    def active(self) -> bool:
        return bool(self.checks) or self.reviews

    @property
    def reviews(self) -> bool:
        return self.review != "off"


@dataclass(frozen=True)
class Next:
    """Where a verification goes after a step: the phase to save, what the implementer is
    told (``FEEDBACK``), or the block (``kind`` set)."""

    phase: Phase | None
    feedback: str = ""
    kind: BlockKind | None = None
    reason: str = ""


def policy_of(cfg: Config, board: str) -> Policy:
    """The board's policy from the configuration (its own entry, else ``"*"``'s)."""
    return Policy(
        checks=tuple(cfg.checks.get(board, cfg.checks.get(EVERY_BOARD, []))),
        review=cfg.review.get(board, cfg.review.get(EVERY_BOARD, "off")),
        check_turns=cfg.check_turns,
        review_rounds=cfg.review_rounds,
        check_timeout=cfg.check_timeout,
    )


def after_checks(runs: Sequence[CheckRun], turns_fed: int, policy: Policy) -> Next:
    """All passed: the review, or acceptance without one. A failure: another turn told
    what failed while ``check_turns`` allow one, else blocked ``checks`` with the output."""
    failed = [run for run in runs if not run.passed]
    if not failed:
        return Next(Phase.REVIEWING if policy.reviews else Phase.APPROVED)
    if turns_fed < policy.check_turns:
        return Next(Phase.FEEDBACK, feedback=checks_feedback(failed))
    last = failed[0]
    reason = (
        f"acceptance checks still fail after {turns_fed} turn(s) fed back: "
        f"`{last.command}` {last.ended}; its output ends: "
        f"{redact.shown(last.tail[-1000:], 1000)}"
    )
    return Next(None, kind=BlockKind.CHECKS, reason=reason)


def after_review(verdict: Verdict, rounds_fed: int, policy: Policy) -> Next:
    """Approved: accepted. Changes asked: another turn told the findings while
    ``review_rounds`` allow one, else blocked ``review`` with the findings."""
    if verdict.approved:
        return Next(Phase.APPROVED)
    if rounds_fed < policy.review_rounds:
        return Next(Phase.FEEDBACK, feedback=review_feedback(verdict))
    reason = (
        f"the reviewer ({verdict.reviewer}) still asks for changes after {rounds_fed} "
        f"round(s): {verdict.summary}; findings: {findings_line(verdict)}"
    )
    return Next(None, kind=BlockKind.REVIEW, reason=redact.shown(reason, 4000))


def checks_feedback(failed: Sequence[CheckRun]) -> str:
    """What the implementer's next turn is told of the checks that failed: each command,
    its exit code and the tail of its output (credentials hidden, control characters
    escaped, newlines kept so a traceback reads as one)."""
    parts = ["Your answer said completed, but these acceptance checks failed in the worktree:"]
    for run in failed:
        tail = printable(redact.shown(run.tail, FED_TAIL_CHARS), FED_TAIL_CHARS)
        parts.append(f"$ {run.command}\n({run.ended})\n{tail}")
    parts.append("Fix what they report, run them yourself, and answer again.")
    return "\n\n".join(parts)


def review_feedback(verdict: Verdict) -> str:
    """What the implementer's next turn is told of a review asking for changes."""
    lines = [
        f"A reviewer ({verdict.reviewer}) asked for changes: "
        f"{printable(redact.shown(verdict.summary, 2000), 2000)}",
        "Findings:",
    ]
    lines += [
        f"- [{f.severity}] {f.where()}: {printable(redact.shown(f.text, 2000), 2000)}"
        for f in verdict.findings
    ]
    lines.append("Address each finding in the worktree, run the tests, and answer again.")
    return "\n".join(lines)


def findings_line(verdict: Verdict) -> str:
    return "; ".join(f"[{f.severity}] {f.where()}: {f.text}" for f in verdict.findings) or "none"


def choose_reviewer(
    review: str, implementer: str, providers: Sequence[str], unusable: Sequence[str]
) -> str | None:
    """Who reviews: the named provider; for ``auto`` a usable provider other than the
    implementer's (the implementer's own when it is the only usable one: a second look
    by the same CLI beats none). None: no provider is usable."""
    if review not in ("off", "auto"):
        return review
    others = [p for p in providers if p != implementer and p not in unusable]
    if others:
        return others[0]
    return implementer if implementer not in unusable else None
