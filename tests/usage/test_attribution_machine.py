"""The ledger's attribution (``usage/ledger.py`` ``attribute``) against a model of what
the CLIs really spent, under random sessions, resumes, kills, repeats and restarts.

Two kinds of CLI, as the adapters report them:

- a *message-and-total* CLI (claude): each response is reported as a message (its input
  exact, its output the 1 token it began with), and an invocation that ends well reports
  the session's running total (tokens and the CLI's own dollars) across resumes; an
  invocation killed before its end reports no total, and the session's next total does
  not hold its messages;
- a *total-only* CLI (codex): each turn reports the thread's running total, priced by
  the price table; a count that began again (a thread started afresh) reports less.

The spec, as the invariants read it:

- every response's input is counted once, killed or not, however often it is reported
  (and a total reported again adds nothing);
- a session that was never killed is counted exactly as its CLI's total said, and no
  session is ever counted below what its CLI said;
- a CLI's own dollars are counted as it said them; a message's dollars are known
  exactly when a total that holds it followed (it is ``covered``);
- a total-only thread is counted as the sum of what each of its counts reached;
- one session's figures never move another's, and what the ledger holds is what its
  file holds;
- every record says the role of the attempt that reported it (a session is an
  implementer's or a reviewer's), so the totals by role are the sums of their sessions'.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lane_runner.providers.usage import UsageReport, tokens
from lane_runner.usage import ledger
from lane_runner.usage.ledger import Attempt, Ledger
from lane_runner.usage.record import Record, Role
from lane_runner.usage.spend import Totals, by_role, total

BOARD, TASK = "work", "t1"
MESSAGES, TOTALS = "claude", "codex"
SESSIONS = ("s1", "s2")
THREADS = ("th1", "th2")
#: Whose each session is: the first of each CLI implements, the second reviews.
ROLES = {"s1": Role.IMPLEMENT, "s2": Role.REVIEW, "th1": Role.IMPLEMENT, "th2": Role.REVIEW}
PRICED = "gpt-5"
UNPRICED = "claude-sonnet"
PRICES = {PRICED: {"input": 1.25, "output": 10.0}}
INPUT, OUTPUT = st.integers(1, 5_000), st.integers(1, 400)


@dataclass
class Session:
    """What a message-and-total CLI's session really spent, and what it said."""

    said: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0})
    cost: float = 0.0
    inputs: int = 0
    """Input of every response, killed or not."""
    running: list[tuple[str, int, int]] = field(default_factory=list)
    """The current invocation's responses: key, input, final output."""
    reported: list[UsageReport] = field(default_factory=list)
    since: list[str] = field(default_factory=list)
    """Messages reported since the session's last total."""
    killed_since: bool = False
    killed_ever: bool = False
    covered: set[str] = field(default_factory=set)
    uncovered: set[str] = field(default_factory=set)
    last_total: UsageReport | None = None


@dataclass
class Thread:
    """What a total-only CLI's thread said, and the sum of what each of its counts reached."""

    said: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0})
    reached: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0})
    last_total: UsageReport | None = None


class Attribution(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.book = Ledger(Path(self.directory.name))
        self.sessions = {name: Session() for name in SESSIONS}
        self.threads = {name: Thread() for name in THREADS}
        self.keys = itertools.count(1)
        self.attempts = itertools.count(1)
        self.clock = 1_000.0

    def teardown(self) -> None:
        self.directory.cleanup()

    def report(self, provider: str, figure: UsageReport) -> list[Record]:
        self.clock += 1.0
        role = ROLES[figure.session_id or ""]
        attempt = Attempt(BOARD, TASK, 1, next(self.attempts), provider, role)
        return self.book.record(attempt, figure, PRICES, self.clock)

    def totals(self, provider: str, session: str) -> Totals:
        return total(r for r in self.book.records(BOARD)
                     if r.provider == provider and r.session == session)

    # -- a message-and-total CLI ------------------------------------------------------

    @rule(name=st.sampled_from(SESSIONS), spent_input=INPUT, final_output=OUTPUT)
    def a_response_is_streamed(self, name: str, spent_input: int, final_output: int) -> None:
        session = self.sessions[name]
        key = f"msg_{next(self.keys)}"
        figure = UsageReport("message", name, {UNPRICED: tokens(input=spent_input,
                                                                  output=1).tokens}, key=key)
        assert self.report(MESSAGES, figure), "a new message is recorded"
        session.running.append((key, spent_input, final_output))
        session.reported.append(figure)
        session.since.append(key)
        session.inputs += spent_input

    @rule(name=st.sampled_from(SESSIONS), dollars=st.floats(0.0, 0.5))
    def the_invocation_ends_with_the_sessions_total(self, name: str, dollars: float) -> None:
        session = self.sessions[name]
        session.said["input"] += sum(spent for _, spent, _ in session.running)
        session.said["output"] += sum(out for _, _, out in session.running)
        session.cost += dollars
        figure = UsageReport("cumulative", name, {UNPRICED: tokens(**session.said).tokens},
                             {UNPRICED: session.cost})
        self.report(MESSAGES, figure)
        if session.killed_since:
            session.uncovered.update(session.since)
        else:
            session.covered.update(session.since)
        session.running, session.since, session.killed_since = [], [], False
        session.last_total = figure

    @rule(name=st.sampled_from(SESSIONS))
    def the_invocation_is_killed_before_its_total(self, name: str) -> None:
        session = self.sessions[name]
        if session.running:  # the next total of the session does not hold its responses
            session.running = []
            session.killed_since = session.killed_ever = True

    @precondition(lambda self: any(s.reported for s in self.sessions.values()))
    @rule(data=st.data())
    def a_message_is_reported_again(self, data: st.DataObject) -> None:
        reported = [figure for s in self.sessions.values() for figure in s.reported]
        figure = data.draw(st.sampled_from(reported))
        assert self.report(MESSAGES, figure) == [], "a message is counted once"

    @precondition(lambda self: any(s.last_total and not s.since for s in self.sessions.values()))
    @rule(data=st.data())
    def a_total_is_reported_again(self, data: st.DataObject) -> None:
        """Again before anything newer is said (a total is not said after newer messages)."""
        said = [s.last_total for s in self.sessions.values()
                if s.last_total is not None and not s.since]
        added = self.report(MESSAGES, data.draw(st.sampled_from(said)))
        assert sum(total(added).tokens.values()) == 0 and total(added).cost_usd == 0.0

    # -- a total-only CLI -------------------------------------------------------------

    @rule(name=st.sampled_from(THREADS), spent_input=INPUT, spent_output=OUTPUT)
    def a_turn_reports_the_threads_total(
        self, name: str, spent_input: int, spent_output: int
    ) -> None:
        thread = self.threads[name]
        thread.said["input"] += spent_input
        thread.said["output"] += spent_output
        thread.reached = {kind: thread.reached[kind] + grown for kind, grown in
                          (("input", spent_input), ("output", spent_output))}
        self.say(thread, name)

    @precondition(lambda self: any(t.said["input"] > 1 for t in self.threads.values()))
    @rule(data=st.data())
    def the_threads_count_begins_again(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from([n for n, t in self.threads.items()
                                          if t.said["input"] > 1]))
        thread = self.threads[name]
        again = data.draw(st.integers(1, thread.said["input"] - 1))
        thread.said = {"input": again, "output": 0}
        thread.reached["input"] += again
        self.say(thread, name)

    def say(self, thread: Thread, name: str) -> None:
        figure = UsageReport("cumulative", name, {PRICED: tokens(**thread.said).tokens})
        self.report(TOTALS, figure)
        thread.last_total = figure

    # -- the spec ---------------------------------------------------------------------

    @invariant()
    def every_responses_input_is_counted_once(self) -> None:
        for name, session in self.sessions.items():
            assert self.totals(MESSAGES, name).tokens["input"] == session.inputs

    @invariant()
    def a_session_never_killed_is_counted_as_its_cli_said_and_none_below(self) -> None:
        for name, session in self.sessions.items():
            counted = self.totals(MESSAGES, name).tokens
            if session.last_total is None:
                continue
            assert counted["output"] >= session.said["output"]
            if not session.killed_ever and not session.since:
                assert (counted["input"], counted["output"]) == (
                    session.said["input"], session.said["output"])

    @invariant()
    def the_clis_dollars_are_counted_as_said_and_a_message_priced_once_covered(self) -> None:
        for name, session in self.sessions.items():
            counted = self.totals(MESSAGES, name)
            assert counted.cost_usd == pytest.approx(session.cost)
            assert counted.unpriced == len(session.uncovered | set(session.since))

    @invariant()
    def a_threads_counts_each_reached_are_summed(self) -> None:
        for name, thread in self.threads.items():
            counted = self.totals(TOTALS, name)
            assert {kind: counted.tokens[kind] for kind in thread.reached} == thread.reached
            expected = ledger.price(PRICED, thread.reached, PRICES) or 0.0
            assert counted.cost_usd == pytest.approx(expected)

    @invariant()
    def each_record_says_its_sessions_role_and_the_roles_total_their_sessions(self) -> None:
        held = self.book.records(BOARD)
        assert all(r.role is ROLES[r.session] for r in held)
        roles = by_role(held)
        for role in Role:
            mine = [r for r in held if ROLES[r.session] is role]
            expected = total(mine).to_dict() if mine else None
            assert roles.get(role.value) == expected

    @invariant()
    def the_ledger_is_what_its_file_holds(self) -> None:
        held = self.book.records(BOARD)
        assert Ledger(Path(self.directory.name)).records(BOARD) == held
        assert len({r.id for r in held}) == len(held)


Attribution.TestCase.settings = settings(max_examples=150, stateful_step_count=30)
TestAttribution = Attribution.TestCase
