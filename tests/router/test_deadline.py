"""One deadline per routing call, against a loopback router that trickles its answer
one byte at a time: no per-read timeout ever fires, only the call's deadline (and a
shutdown) can end it (docs/ARCHITECTURE.md §3.5)."""

from __future__ import annotations

import signal
import threading

import pytest

from lane_runner.router import Cause, HttpRouter, RoutingError
from tests.harness import Lane
from tests.harness import lane as lane  # noqa: F401 - the fixture, used below
from tests.router.conftest import ScriptedRouter

CONTEXT = "Task 3: a router that trickles."
SELECTED = {"x-model-router-selected-model": "worker/codex/gpt-5/high"}


def trickle(server: ScriptedRouter, seconds_per_byte: float = 0.05) -> None:
    """An answer that would arrive whole, and valid, after a long while (~10 s at 0.05)."""
    server.reply(headers=SELECTED, body=b" " * 100 + b"{}", trickle=seconds_per_byte)


def test_a_trickling_router_is_cut_off_at_the_calls_deadline(server, client):
    trickle(server)
    trickle(server)  # a retry would get another trickle: the deadline covers retries too
    router = HttpRouter(server.url, client, timeout=1.0, retries=3, backoff=0.01)
    with pytest.raises(RoutingError, match="longer than 1 s") as raised:
        router.route(CONTEXT, "cli-auto")
    assert raised.value.cause is Cause.TIMEOUT and raised.value.transient


def test_the_deadline_covers_the_judge(server, client):
    server.reply(body=b'{"choices": [{"message": {"content": "accept"}}]}', trickle=0.05)
    router = HttpRouter(server.url, client, timeout=1.0, retries=0)
    with pytest.raises(RoutingError, match="longer than 1 s"):
        router.judge(CONTEXT, "{}")


def test_a_shutdown_ends_a_trickling_call_as_cancelled(server, client):
    trickle(server, 0.5)  # ~50 s whole
    cancel = threading.Event()
    router = HttpRouter(server.url, client, timeout=600, retries=0, cancel=cancel)
    outcome: list[BaseException] = []

    def route() -> None:
        try:
            router.route(CONTEXT, "cli-auto")
        except RoutingError as error:
            outcome.append(error)

    worker = threading.Thread(target=route)
    worker.start()
    while not server.requests:  # the request is in; the trickle has begun
        worker.join(0.02)
    cancel.set()
    worker.join(30)  # far less than the trickle's ~50 s, far more than one slice
    assert not worker.is_alive()
    [error] = outcome
    assert isinstance(error, RoutingError) and error.cause is Cause.CANCELLED


def test_a_slow_but_steady_answer_within_the_deadline_is_accepted(server, client):
    server.reply(headers=SELECTED, body=b"{}", trickle=0.002)
    router = HttpRouter(server.url, client, timeout=60, retries=0, cancel=threading.Event())
    assert router.route(CONTEXT, "cli-auto").model == "gpt-5"


def test_sigterm_is_honoured_while_the_router_trickles(lane: Lane, server: ScriptedRouter) -> None:
    """``shutdown_grace`` is 1 s and ``router_timeout`` 600 s: only the shutdown can end the
    routing call before the trickle (~150 s) does, and the daemon must not wait for it."""
    server.reply(headers=SELECTED, body=b" " * 300 + b"{}", trickle=0.5)
    lane.write_config(router_url=server.url, router_timeout=600)
    task = lane.add("routed slowly", body="[sim:ok]")
    daemon = lane.start()
    lane.wait(lambda: bool(server.requests), what="the routing request to reach the router")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0  # far less than the trickle; far more than the grace
    log = (lane.root / "daemon.log").read_text()
    assert "Traceback" not in log and "cancelled" in log
    assert lane.board.get_task(task.id).failure_count == 0
