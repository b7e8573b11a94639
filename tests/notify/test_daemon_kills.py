"""The daemon's notifications through kill -9 (real daemon, real simulated CLIs, a real
SQLite board, real Apprise to a loopback receiver): what was written before the kill
goes out at the next start, what was sent is not sent again, and the one send in
flight at the kill is the only one that may repeat, with the same id."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator

import pytest

from lane_runner.board.model import NoticeState, Status
from tests.harness import Lane
from tests.notify.receivers import HttpReceiver, free_port, http_receiver

pytest.importorskip("apprise", reason="the notify extra is not installed")


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with http_receiver() as started:
        yield started


def configure(lane: Lane, url: str) -> None:
    lane.write_config(notify={"*": {"urls": [url], "events": ["done"]}})


def done(lane: Lane, title: str) -> str:
    task = lane.add(title)
    lane.wait(lambda: lane.board.get_task(task.id).status is Status.DONE, what=title)
    return task.id


def kill_9(lane: Lane) -> None:
    for daemon in lane.daemons:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()


def states(lane: Lane) -> dict[str, NoticeState]:
    return {notice.data["id"]: notice.state for notice in lane.board.notices()}


def started(lane: Lane) -> None:
    lane.start()
    lane.wait(lambda: lane.board.outbox_cursor() is not None, what="the outbox's first look")


def test_written_but_not_sent_at_the_kill_goes_out_once_at_the_next_start(lane: Lane) -> None:
    port = free_port()  # nothing listens yet: the send fails, the entry waits
    configure(lane, f"json://127.0.0.1:{port}/hook")
    started(lane)
    done(lane, "first")
    lane.wait(lambda: any(n.attempts for n in lane.board.notices()), what="a failed send")
    kill_9(lane)
    [(notice_id, state)] = states(lane).items()
    assert state is NoticeState.PENDING
    with http_receiver(port) as receiver:
        lane.start()
        lane.wait(lambda: states(lane)[notice_id] is NoticeState.SENT, what="the send")
        second = done(lane, "second")
        lane.wait(lambda: len(receiver.posts) == 2, what="the second notification")
        assert receiver.ids() == [notice_id, receiver.ids()[1]]
        assert receiver.ids()[1].endswith("/done") and second


def test_sent_before_the_kill_is_not_sent_again(lane: Lane, receiver: HttpReceiver) -> None:
    configure(lane, receiver.url)
    started(lane)
    done(lane, "first")
    lane.wait(lambda: NoticeState.SENT in states(lane).values(), what="the first send")
    kill_9(lane)
    lane.start()
    done(lane, "second")
    lane.wait(lambda: len(receiver.posts) == 2, what="the second notification")
    assert len(set(receiver.ids())) == 2


def test_the_send_in_flight_at_the_kill_is_the_only_one_repeated_with_its_id(
    lane: Lane, receiver: HttpReceiver
) -> None:
    configure(lane, receiver.url)
    started(lane)
    done(lane, "first")
    lane.wait(lambda: len(receiver.posts) == 1, what="the first send")
    receiver.holding = True  # the next send arrives and waits for its answer
    done(lane, "second")
    lane.wait(lambda: len(receiver.posts) == 2, what="the second send, in flight")
    kill_9(lane)
    receiver.holding = False
    receiver.release.set()
    lane.start()
    done(lane, "third")
    lane.wait(lambda: len(receiver.posts) == 4, what="the repeat and the third")
    counts = Counter(receiver.ids())
    in_flight = receiver.posts[1].payload["id"]
    assert counts[in_flight] == 2
    assert sorted(counts.values()) == [1, 1, 2]
    lane.wait(lambda: set(states(lane).values()) == {NoticeState.SENT}, what="every mark")
    assert len(receiver.posts) == 4


def test_run_until_idle_tells_of_its_last_tasks_before_it_exits(
    lane: Lane, receiver: HttpReceiver
) -> None:
    configure(lane, receiver.url)
    lane.add("only one")  # before the first start: its run is the start's, told of
    assert lane.start("--until-idle").wait(timeout=120) == 0
    [notice_id] = receiver.ids()
    assert notice_id.endswith("/done")
    assert states(lane) == {notice_id: NoticeState.SENT}
