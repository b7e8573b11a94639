"""The outbox on a real board, sent through real Apprise to a loopback receiver: each
event once, with its id; retried with a backoff; dropped after ``notify_attempts``; one
runner sends each entry; a lease that ran out (its sender died) lets another send it."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from lane_runner.board.base import Board
from lane_runner.board.model import BlockKind, NewTask, NoticeState, Outcome
from lane_runner.notifications import dispatch
from lane_runner.notifications.dispatch import Dispatcher
from lane_runner.service import metrics
from tests.board.conftest import Clock
from tests.notify.conftest import StoreOpener, notify_config
from tests.notify.receivers import HttpReceiver

NODE = "node-a"


def table(url: str, events: str = "") -> str:
    chosen = f", events = [{events}]" if events else ""
    return f'{{main = {{urls = ["{url}"]{chosen}}}}}'


def dispatcher(
    store: object, tmp_path: Path, url: str, node: str = NODE, **more: str
) -> Dispatcher:
    cfg = notify_config(tmp_path, table(url, more.pop("events", "")), **more)
    return Dispatcher(store, node, lambda: cfg)  # type: ignore[arg-type]


def finish(
    board: Board, title: str = "Fix the parser", summary: str = "Parser fixed.\nMore."
) -> str:
    task = board.add_task(NewTask(title=title))
    claim = board.claim(NODE, 60, "cli-auto")
    assert claim is not None and claim.task.id == task.id
    board.complete(claim.run.id, {"ok": True}, summary)
    return task.id


def block(board: Board, reason: str, kind: BlockKind = BlockKind.NEEDS_INPUT) -> str:
    task = board.add_task(NewTask(title="Stuck one"))
    claim = board.claim(NODE, 60, "cli-auto")
    assert claim is not None
    board.block(claim.run.id, reason, kind)
    return task.id


def test_a_done_task_is_sent_once_with_its_id_and_words(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver
) -> None:
    store = open_store()
    board = store.create_board("main")
    sender = dispatcher(store, tmp_path, receiver.url)
    sender.turn()  # the first look: the cursor starts at the newest event
    task_id = finish(board)
    assert sender.turn() and not sender.turn()  # sent, then nothing more to send
    [post] = receiver.posts
    event = next(e for e in board.events(task_id) if e.kind == "completed")
    assert post.payload["id"] == f"main/{event.id}/done"
    assert post.headers["X-Lane-Runner-Notification"] == post.payload["id"]
    assert "main/" + task_id in post.payload["title"] and "Fix the parser" in post.payload["title"]
    body = post.payload["message"]
    assert "outcome: done" in body and "why: Parser fixed." in body and "More." not in body
    assert f"lane-runner task show {task_id} --board main" in body
    [entry] = board.notices()  # type: ignore[attr-defined]
    assert entry.state is NoticeState.SENT and entry.attempts == 1


def test_what_happened_before_notifications_were_configured_is_not_sent(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver
) -> None:
    board = open_store().create_board("main")
    finish(board)
    sender = dispatcher(open_store(), tmp_path, receiver.url)
    sender.turn()
    sender.turn()
    assert receiver.posts == []


def test_only_the_configured_events_are_sent_and_kinds_are_told_apart(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver
) -> None:
    store = open_store()
    board = store.create_board("main")
    sender = dispatcher(store, tmp_path, receiver.url, events='"blocked", "budget_spent"')
    sender.turn()
    finish(board)
    block(board, "needs a decision: api_key=sk-live-abcdefghijklmnop1234")
    block(board, "the task's budget is spent", BlockKind.BUDGET)
    sender.turn()
    kinds = sorted(post.payload["id"].split("/")[-1] for post in receiver.posts)
    assert kinds == ["blocked", "budget_spent"]
    blocked = next(p for p in receiver.posts if p.payload["id"].endswith("/blocked"))
    assert "outcome: blocked (needs_input)" in blocked.payload["message"]
    assert "sk-live-abcdefghijklmnop1234" not in blocked.payload["message"]


def test_a_receiver_that_fails_three_times_gets_it_on_the_fourth_with_the_same_id(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver, clock: Clock
) -> None:
    store = open_store()
    board = store.create_board("main")
    sender = dispatcher(store, tmp_path, receiver.url)
    sender.turn()
    finish(board)
    receiver.fail_next = 3
    before = metrics.NOTIFICATIONS.labels("main", "done", "failed")._value.get()
    for attempt in range(1, 4):
        sender.turn()
        assert len(receiver.failures) == attempt and receiver.posts == []
        sender.turn()  # not due yet: the backoff holds it
        assert len(receiver.failures) == attempt
        clock.advance(dispatch.backoff(attempt))
    sender.turn()
    assert len(receiver.posts) == 1
    assert {f.payload["id"] for f in receiver.failures} == {receiver.posts[0].payload["id"]}
    assert metrics.NOTIFICATIONS.labels("main", "done", "failed")._value.get() == before + 3
    [entry] = board.notices()  # type: ignore[attr-defined]
    assert entry.state is NoticeState.SENT and entry.attempts == 4


def test_a_notification_is_dropped_after_notify_attempts_with_a_log_line_and_a_metric(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver, clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = open_store()
    board = store.create_board("main")
    sender = dispatcher(store, tmp_path, receiver.url, notify_attempts="2")
    sender.turn()
    finish(board)
    receiver.fail_next = 10
    before = metrics.NOTIFICATIONS.labels("main", "done", "dropped")._value.get()
    with caplog.at_level(logging.WARNING, "lane_runner.notifications"):
        sender.turn()
        clock.advance(dispatch.backoff(1))
        sender.turn()
        clock.advance(dispatch.backoff(5))
        sender.turn()
    assert len(receiver.failures) == 2
    assert metrics.NOTIFICATIONS.labels("main", "done", "dropped")._value.get() == before + 1
    assert any("dropped after 2 attempts" in r.getMessage() for r in caplog.records)
    [entry] = board.notices()  # type: ignore[attr-defined]
    assert entry.state is NoticeState.DROPPED and entry.error


def test_credentials_in_a_url_are_never_stored_or_logged(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = open_store()
    board = store.create_board("main")
    url = f"json://hookuser:s3cret-pass@127.0.0.1:{receiver.port}/hook"
    sender = dispatcher(store, tmp_path, url, notify_attempts="1")
    sender.turn()
    finish(board)
    receiver.fail_next = 1
    with caplog.at_level(logging.DEBUG):
        sender.turn()
    [entry] = board.notices()  # type: ignore[attr-defined]
    assert entry.state is NoticeState.DROPPED
    assert "s3cret-pass" not in repr(entry) and "s3cret-pass" not in caplog.text


def test_two_runners_send_each_event_once(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver
) -> None:
    board = open_store().create_board("main")
    runners = [dispatcher(open_store(), tmp_path, receiver.url, node=f"node-{n}") for n in "ab"]
    runners[0].turn()
    done = [finish(board, title=f"task {n}") for n in range(12)]

    def serve(runner: Dispatcher, start: threading.Barrier) -> None:
        start.wait()
        for _ in range(5):
            runner.turn()

    start = threading.Barrier(2)
    threads = [threading.Thread(target=serve, args=(r, start)) for r in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = receiver.ids()
    assert len(ids) == len(done) == len(set(ids))


def test_an_entry_whose_sender_died_is_sent_by_another_after_the_lease_with_its_id(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver, clock: Clock
) -> None:
    store = open_store()
    board = store.create_board("main")
    other = dispatcher(open_store(), tmp_path, receiver.url, node="node-b")
    other.turn()
    finish(board)
    other.derive(other.store.board("main"), dispatch.Route.of(other.config(), "main"))  # type: ignore[arg-type]
    taken = board.take_notice(NODE, dispatch.LEASE)  # type: ignore[attr-defined]
    assert taken is not None  # node-a took it, and died before the send
    other.turn()
    assert receiver.posts == []  # leased: nobody else sends it
    clock.advance(dispatch.LEASE)
    other.turn()
    assert receiver.ids() == [taken.data["id"]]


def test_a_restarted_runner_sends_what_it_held_at_once(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver
) -> None:
    store = open_store()
    board = store.create_board("main")
    dispatcher(store, tmp_path, receiver.url).turn()
    finish(board)
    first = dispatcher(store, tmp_path, receiver.url)
    first.derive(board, dispatch.Route.of(first.config(), "main"))  # type: ignore[arg-type]
    assert board.take_notice(NODE, dispatch.LEASE) is not None  # type: ignore[attr-defined]
    dispatcher(open_store(), tmp_path, receiver.url).turn()  # the same node, started again
    assert len(receiver.posts) == 1


def test_ready_work_nobody_claims_and_a_tripped_breaker_are_said_once(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver, clock: Clock
) -> None:
    from lane_runner.service.breaker import Trip

    store = open_store()
    board = store.create_board("main")
    cfg = notify_config(tmp_path, table(receiver.url, '"not_claiming", "breaker_tripped"'))
    trip = Trip("workspace:main:/srv/repo", "fp", "git: index.lock exists", ["main/T1"], 3,
                tripped_at=1_700_000_000.0, probe_at=0.0)
    other = Trip("board:other", "fp", "x", [], 3, tripped_at=1.0, probe_at=0.0)
    sender = Dispatcher(store, NODE, lambda: cfg, lambda: {t.scope: t for t in (trip, other)})
    waiting = board.add_task(NewTask(title="Nobody takes me"))
    now = board.get_task(waiting.id).updated_at
    sender.watch(board, dispatch.Route.of(cfg, "main"), now + 29 * 60)  # type: ignore[arg-type]
    sender.watch(board, dispatch.Route.of(cfg, "main"), now + 31 * 60)  # type: ignore[arg-type]
    sender.watch(board, dispatch.Route.of(cfg, "main"), now + 40 * 60)  # type: ignore[arg-type]
    sender.send_due(board, dispatch.Route.of(cfg, "main"), 8)  # type: ignore[arg-type]
    kinds = sorted(post.payload["id"].split("/")[1] for post in receiver.posts)
    assert kinds == ["breaker", "not_claiming"]
    said = next(p for p in receiver.posts if "/not_claiming/" in p.payload["id"])
    assert waiting.id in said.payload["id"] and "unclaimed for 30+ minutes" in said.payload[
        "message"]


def test_sent_entries_are_pruned_after_their_keep_and_never_derived_again(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver, clock: Clock
) -> None:
    store = open_store()
    board = store.create_board("main")
    sender = dispatcher(store, tmp_path, receiver.url)
    sender.turn()
    finish(board)
    finish(board, title="second")
    receiver.fail_next = 1  # the first send fails: that entry stays pending
    sender.turn()
    sent = [n for n in board.notices() if n.state is NoticeState.SENT]  # type: ignore[attr-defined]
    assert len(sent) == 1
    assert board.prune_notices(max(n.at for n in board.notices()) + 1) == 1  # type: ignore[attr-defined]
    assert [n.state for n in board.notices()] == [NoticeState.PENDING]  # type: ignore[attr-defined]
    clock.advance(dispatch.backoff(1))
    sender.turn()
    assert len(receiver.posts) == 2 and len(set(receiver.ids())) == 2


def test_a_boards_day_budget_spent_is_said_once_that_day_with_the_task_costs(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver
) -> None:
    import time

    from lane_runner.usage.record import Record, day_of

    store = open_store()
    board = store.create_board("main")
    cfg = notify_config(tmp_path, table(receiver.url, '"budget_spent", "gave_up"'),
                        daily_budget_usd='{"*" = 1.0}')
    sender = Dispatcher(store, NODE, lambda: cfg)
    sender.turn()
    route = dispatch.Route.of(cfg, "main")
    now = time.time()
    task = board.add_task(NewTask(title="Costly"))
    spent = Record(id="r1", at=now, day=day_of(now), board="main", task_id=task.id, run_id=1,
                   attempt=1, provider="p", model="m", session="s", basis="message",
                   tokens={}, cost_usd=1.25, cost_source="cli")
    board.record_usage([spent.to_dict()])  # type: ignore[attr-defined]
    for _ in range(2):
        sender.watch(board, route, now)  # type: ignore[arg-type]
    claim = board.claim(NODE, 60, "cli-auto")
    assert claim is not None
    board.reclaim(claim.run.id, "broke", Outcome.FAILED, count_failure=True)
    for _ in range(3):  # the failure limit: given up
        claim = board.claim(NODE, 60, "cli-auto")
        if claim is not None:
            board.reclaim(claim.run.id, "broke", Outcome.FAILED, count_failure=True)
    sender.turn()
    by_kind = {post.payload["id"].split("/")[-1 if "/budget/" not in post.payload["id"]
                                              else 1]: post for post in receiver.posts}
    assert set(by_kind) == {"budget", "gave_up"}
    assert "daily budget $1.0000 spent" in by_kind["budget"].payload["message"]
    assert "cost: $1.25" in by_kind["gave_up"].payload["message"]
