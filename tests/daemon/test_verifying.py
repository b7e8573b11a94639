"""The pure side of checks and review (``run/verifying.py``, ``run/verification.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lane_runner import config
from lane_runner.board.model import BlockKind
from lane_runner.errors import UsageError
from lane_runner.run import verifying
from lane_runner.run.verification import (
    EVIDENCE_TAIL_CHARS,
    CheckRun,
    Finding,
    Phase,
    Round,
    Verdict,
    Verification,
    first,
)
from lane_runner.run.verifying import Policy

PASSED = CheckRun("pytest -q", 0, "passed", 1.5, "3 passed")
FAILED = CheckRun("pytest -q", 1, "failed with exit status 1", 2.0, "E assert 1 == 2\n1 failed")
ASKED = Verdict("claude", "m", "request_changes", "needs a test",
                (Finding("a.py", 3, "major", "no test"),))
APPROVED = Verdict("claude", "m", "approve", "fine")


def test_checks_that_pass_go_to_the_review_or_straight_to_acceptance() -> None:
    assert verifying.after_checks([PASSED], 0, Policy(review="auto")).phase is Phase.REVIEWING
    assert verifying.after_checks([PASSED], 0, Policy()).phase is Phase.APPROVED
    assert verifying.after_checks([], 0, Policy()).phase is Phase.APPROVED


def test_a_failing_check_is_fed_back_while_turns_are_left_then_blocks() -> None:
    policy = Policy(checks=("pytest -q",), check_turns=2)
    fed = verifying.after_checks([PASSED, FAILED], 1, policy)
    assert fed.phase is Phase.FEEDBACK and fed.kind is None
    assert "$ pytest -q" in fed.feedback and "E assert 1 == 2\n1 failed" in fed.feedback
    blocked = verifying.after_checks([FAILED], 2, policy)
    assert blocked.phase is None and blocked.kind is BlockKind.CHECKS
    assert "1 failed" in blocked.reason and "2 turn(s)" in blocked.reason


def test_review_rounds_bound_the_changes_asked() -> None:
    policy = Policy(review="auto", review_rounds=1)
    assert verifying.after_review(APPROVED, 5, policy).phase is Phase.APPROVED
    fed = verifying.after_review(ASKED, 0, policy)
    assert fed.phase is Phase.FEEDBACK and "- [major] a.py:3: no test" in fed.feedback
    blocked = verifying.after_review(ASKED, 1, policy)
    assert blocked.kind is BlockKind.REVIEW and "a.py:3: no test" in blocked.reason


def test_check_output_fed_back_hides_credentials_and_escapes_control_characters() -> None:
    noisy = CheckRun("make", 2, "failed", 0.1, "token=ghp_" + "a" * 36 + " \x1b[31m red\n")
    fed = verifying.checks_feedback([noisy])
    assert "ghp_" + "a" * 36 not in fed and "\x1b" not in fed and "\\x1b[31m red\n" in fed


def test_auto_chooses_another_usable_provider_than_the_implementers() -> None:
    providers = ("codex", "claude")
    assert verifying.choose_reviewer("auto", "codex", providers, []) == "claude"
    assert verifying.choose_reviewer("auto", "claude", providers, []) == "codex"
    assert verifying.choose_reviewer("auto", "codex", providers, ["claude"]) == "codex"
    assert verifying.choose_reviewer("auto", "codex", providers, ["claude", "codex"]) is None
    assert verifying.choose_reviewer("codex", "codex", providers, ["codex"]) == "codex"


def test_the_policy_is_the_boards_entry_else_every_boards(tmp_path: Path) -> None:
    cfg = config.load(tmp_path).replace(
        checks={"*": ["make"], "main": ["pytest"]}, review="auto"
    )
    assert verifying.policy_of(cfg, "main").checks == ("pytest",)
    assert verifying.policy_of(cfg, "other") == Policy(("make",), "auto")


texts = st.text(max_size=20)
checks = st.builds(CheckRun, texts, st.one_of(st.none(), st.integers(-9, 255)), texts,
                   st.floats(0, 1e4, allow_nan=False).map(lambda x: round(x, 3)), texts)
verdicts = st.builds(
    Verdict, texts, texts, st.sampled_from(["approve", "request_changes"]), texts,
    st.lists(st.builds(Finding, texts, st.integers(0, 10**6), texts, texts), max_size=3)
    .map(tuple),
)
rounds = st.builds(Round, st.lists(checks, max_size=3).map(tuple), st.one_of(st.none(), verdicts))


@given(st.sampled_from(list(Phase)), st.integers(0, 9), st.integers(0, 9),
       st.lists(rounds, min_size=1, max_size=4).map(tuple), texts)
def test_a_verification_reads_back_as_it_was_saved(
    phase: Phase, turns: int, review_rounds: int, saved: tuple[Round, ...], feedback: str
) -> None:
    kept = Verification(phase, {"summary": "s"}, {"provider": "codex"}, turns, review_rounds,
                        saved, feedback)
    assert Verification.of(kept.to_dict()) == kept


def test_a_new_answer_carries_the_counts_and_evidence_on() -> None:
    checked = first({"summary": "one"}, {"provider": "codex"}).checked((FAILED,))
    fed = Verification(Phase.FEEDBACK, checked.answer, checked.route, 1, 0, checked.rounds, "x")
    again = fed.next_answer({"summary": "two"}, {"provider": "codex"})
    assert (again.phase, again.check_turns, again.feedback) == (Phase.CHECKING, 1, "")
    assert again.rounds == (Round((FAILED,)), Round())


@pytest.mark.parametrize(
    ("key", "value", "complaint"),
    [
        ("review", "maybe", "expected one of off, auto, codex, claude"),
        ("review", '{"no/board" = "auto"}', "is not a board name"),
        ("checks", '{main = [1]}', "expected a list of shell commands"),
        ("checks", '[""]', "expected a list of shell commands"),
    ],
)
def test_bad_checks_or_review_settings_say_what_was_wrong(
    tmp_path: Path, key: str, value: str, complaint: str
) -> None:
    with pytest.raises(UsageError, match=complaint):
        config.load(tmp_path, {f"LANE_RUNNER_{key.upper()}": value})


def test_the_evidence_keeps_only_the_end_of_each_checks_output() -> None:
    long = CheckRun("make", 1, "failed", 1.0, "x" * 10_000 + "the end")
    kept = first({"summary": "s"}, {"provider": "codex"}).checked((long,)).evidence()
    tail = kept["rounds"][0]["checks"][0]["tail"]
    assert tail.endswith("the end") and len(tail) == EVIDENCE_TAIL_CHARS


@given(st.lists(st.booleans(), max_size=30), st.integers(0, 3), st.integers(0, 3),
       st.booleans())
def test_any_run_of_outcomes_feeds_back_within_the_limits_and_accepts_only_approved(
    outcomes: list[bool], check_turns: int, review_rounds: int, reviews: bool
) -> None:
    """Each drawn outcome is a check passing (or not) or a reviewer approving (or not):
    turns and rounds fed back never pass their limits, a block names the step that
    failed, and an answer is approved only by a passing check and, with review on, an
    approving verdict right after it."""
    policy = Policy(("make",), "auto" if reviews else "off", check_turns, review_rounds)
    phase, turns, rounds, last = Phase.CHECKING, 0, 0, None
    for good in outcomes:
        if phase is Phase.CHECKING:
            step = verifying.after_checks([PASSED if good else FAILED], turns, policy)
            turns += step.phase is Phase.FEEDBACK
            last = "checks"
        else:
            step = verifying.after_review(APPROVED if good else ASKED, rounds, policy)
            rounds += step.phase is Phase.FEEDBACK
            last = "review"
        assert turns <= check_turns and rounds <= review_rounds
        if step.kind is not None:
            assert step.kind.value == last and not good
            return
        assert step.phase is not None
        if step.phase is Phase.APPROVED:
            assert good and (last == "review") == reviews
            return
        phase = Phase.CHECKING if step.phase is Phase.FEEDBACK else step.phase
