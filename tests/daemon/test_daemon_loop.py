"""The daemon loop in-process, with a real board and simulated CLIs, and a worker that crashes.

Nothing real makes an executor thread die of an unexpected bug, so this one test
replaces ``RunExecutor.execute`` for one task; everything else is real.
"""

from __future__ import annotations

import signal
import threading

import pytest

from lane_runner import config
from lane_runner.board.model import BlockKind, Outcome, Status
from lane_runner.daemon import Daemon
from lane_runner.run.executor import RunExecutor
from lane_runner.service.notify import Notifier
from tests.harness import Lane


def all_settled(daemon: Daemon) -> bool:
    board = daemon.services.store.board("work")
    return not daemon.workers and all(
        task.status in (Status.DONE, Status.BLOCKED) for task in board.list_tasks()
    )


def test_a_crashing_worker_thread_never_stops_the_daemon(
    lane: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IS_SANDBOX", "1")
    doomed = lane.add("this run's executor has a bug")
    others = [lane.add(f"healthy {index}") for index in range(4)]
    real_execute = RunExecutor.execute

    def execute(self: RunExecutor):  # type: ignore[no-untyped-def]
        if self.task.id == doomed.id:
            raise RuntimeError("bug in the executor")
        return real_execute(self)

    monkeypatch.setattr(RunExecutor, "execute", execute)
    daemon = Daemon(config.load(lane.root, {}), until=all_settled, notifier=Notifier(""))
    assert daemon.serve() == 0
    for task in others:
        assert lane.board.get_task(task.id).status is Status.DONE
    crashed = lane.board.get_task(doomed.id)
    assert crashed.status is Status.BLOCKED and crashed.block_kind is BlockKind.GAVE_UP
    runs = lane.runs(doomed.id)
    assert len(runs) == 3 and runs[0].outcome is Outcome.FAILED
    assert "bug in the executor" in (runs[0].reason or "")


def test_sighup_reloads_the_configuration(lane: Lane, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def until(daemon: Daemon) -> bool:
        seen.append(daemon.services.cfg.concurrency)
        if len(seen) == 1:
            lane.write_config(concurrency=2)
            threading.Timer(0, signal.raise_signal, (signal.SIGHUP,)).start()
        return daemon.services.cfg.concurrency == 2

    before = signal.getsignal(signal.SIGHUP)
    daemon = Daemon(config.load(lane.root, {}), until=until, notifier=Notifier(""))
    assert daemon.serve() == 0
    assert seen[0] == 4 and seen[-1] == 2
    assert signal.getsignal(signal.SIGHUP) is before  # the daemon's handlers are gone
