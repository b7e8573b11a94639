"""The outbox as a state machine (hypothesis): tasks finish, the receiver fails, two
runners pass, crash before a send or after it (the send made, its mark not), restart,
and time moves. Each notification reaches the receiver at most once, or twice when a
runner died after sending it; every entry marked sent was received; and once the
receiver answers and time passes, every notification arrives."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from lane_runner.board.model import NewTask, NoticeState
from lane_runner.board.sqlite import SqliteStore
from lane_runner.notifications import dispatch
from lane_runner.notifications.dispatch import Dispatcher
from lane_runner.notifications.notices import Message
from tests.board.conftest import FAILURE_LIMIT, Clock
from tests.notify.conftest import notify_config
from tests.notify.receivers import http_receiver

pytest.importorskip("apprise", reason="the notify extra is not installed")
NODES = ("node-a", "node-b")


def machine(tmp: Path) -> type[RuleBasedStateMachine]:
    class OutboxMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.receiver_context = http_receiver()
            self.receiver = self.receiver_context.__enter__()
            self.clock = Clock()
            self.root = tmp / f"m{id(self)}"
            self.cfg = notify_config(
                self.root, f'{{main = {{urls = ["{self.receiver.url}"], events = ["done"]}}}}',
                notify_attempts="100",
            )
            self.stores = [SqliteStore(self.root / "boards", failure_limit=FAILURE_LIMIT,
                                       clock=self.clock) for _ in NODES]
            self.board = self.stores[0].create_board("main")
            self.runners = [self._runner(n) for n in range(len(NODES))]
            self.runners[0].turn()  # the first look
            self.finished = 0
            self.repeats: Counter[str] = Counter()  # ids sent by a runner that then died

        def _runner(self, n: int) -> Dispatcher:
            return Dispatcher(self.stores[n], NODES[n], lambda: self.cfg)

        @rule()
        def finish(self) -> None:
            self.board.add_task(NewTask(title=f"t{self.finished}"))
            claim = self.board.claim("worker", 60, "cli-auto")
            assert claim is not None
            self.board.complete(claim.run.id, {"n": self.finished}, "ok")
            self.finished += 1

        @rule(n=st.sampled_from(range(len(NODES))), failures=st.integers(0, 2))
        def turn(self, n: int, failures: int) -> None:
            """Runner ``n`` passes, the receiver failing its next ``failures`` requests."""
            self.receiver.fail_next = failures
            self.runners[n].turn()

        @rule(n=st.sampled_from(range(len(NODES))), sent=st.booleans())
        def crash(self, n: int, sent: bool) -> None:
            """Runner ``n`` takes an entry and dies before its send, or after it."""
            runner = self.runners[n]
            runner.derive(self.board, dispatch.Route.of(self.cfg, "main"))  # type: ignore[arg-type]
            taken = self.board.take_notice(NODES[n], dispatch.LEASE)
            if taken is not None and sent:
                message = Message.from_dict(taken.data)
                if runner.send(self.receiver.url, message) is None:
                    self.repeats[message.id] += 1
            self.runners[n] = self._runner(n)  # started again

        @rule(seconds=st.sampled_from([1.0, dispatch.BACKOFF_BASE, dispatch.LEASE]))
        def advance(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @invariant()
        def received_at_most_once_but_for_a_repeat(self) -> None:
            for notice_id, count in Counter(self.receiver.ids()).items():
                assert count <= 1 + self.repeats[notice_id], notice_id

        @invariant()
        def marked_sent_means_received(self) -> None:
            received = set(self.receiver.ids())
            for notice in self.board.notices(NoticeState.SENT, 1000):
                assert notice.data["id"] in received

        def teardown(self) -> None:
            """Everything arrives in the end, once the receiver answers and time passes."""
            try:
                self.receiver.fail_next = 0
                for _ in range(40):
                    self.clock.advance(dispatch.BACKOFF_MAX + dispatch.LEASE)
                    if not any([runner.turn() for runner in self.runners]):
                        break
                assert len(set(self.receiver.ids())) == self.finished
                assert not self.board.notices(NoticeState.PENDING, 1000)
            finally:
                for store in self.stores:
                    store.close()
                self.receiver_context.__exit__(None, None, None)

    return OutboxMachine


def test_the_outbox_machine(tmp_path: Path) -> None:
    OutboxMachine = machine(tmp_path)
    OutboxMachine.TestCase.settings = settings(
        max_examples=25, stateful_step_count=25, deadline=None
    )
    OutboxMachine.TestCase().runTest()
