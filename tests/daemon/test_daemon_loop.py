"""The daemon loop in-process, with a real board and simulated CLIs, and a worker that crashes.

Nothing real makes an executor thread die of an unexpected bug, so this one test
replaces ``RunExecutor.execute`` for one task; everything else is real.
"""

from __future__ import annotations

import io
import logging
import signal
import threading
import time
from collections.abc import Callable

import orjson
import pytest

from lane_runner import config
from lane_runner.board.model import BlockKind, Outcome, Status
from lane_runner.daemon import Daemon
from lane_runner.run.executor import RunExecutor
from lane_runner.service import logs
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


def reload_once(
    lane: Lane, changes: dict[str, object], settled: Callable[[Daemon], bool]
) -> Daemon:
    """Serve until ``settled`` (or 30 s): the first tick writes ``changes`` and raises SIGHUP."""
    deadline: list[float] = []

    def until(daemon: Daemon) -> bool:
        if not deadline:
            deadline.append(time.monotonic() + 30)
            lane.write_config(**changes)
            threading.Timer(0, signal.raise_signal, (signal.SIGHUP,)).start()
            return False
        return settled(daemon) or time.monotonic() > deadline[0]

    daemon = Daemon(config.load(lane.root, {}), until=until, notifier=Notifier(""))
    assert daemon.serve() == 0
    return daemon


def test_sighup_reloads_the_configuration(lane: Lane) -> None:
    before = signal.getsignal(signal.SIGHUP)
    daemon = reload_once(lane, {"concurrency": 2}, lambda d: d.services.cfg.concurrency == 2)
    assert daemon.services.cfg.concurrency == 2
    assert signal.getsignal(signal.SIGHUP) is before  # the daemon's handlers are gone


def test_sighup_rebuilds_the_router_and_keeps_restart_keys(
    lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    models = {"low": "m-low", "medium": "m-medium", "high": "m-reloaded", "xhigh": "m-x"}
    with caplog.at_level(logging.WARNING, logger="lane_runner.daemon"):
        daemon = reload_once(
            lane,
            {"codex_models": models, "failure_limit": 9},
            lambda d: d.services.cfg.codex_models == models,
        )
    assert daemon.services.router.route("ctx", "cli-codex-high").model == "m-reloaded"
    assert daemon.services.cfg.failure_limit == 3  # the store was opened with it
    assert "failure_limit changed: the new value takes effect at restart" in caplog.text


def test_a_reload_that_cannot_work_keeps_the_running_configuration(
    lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="lane_runner.daemon"):
        daemon = reload_once(
            lane,
            {"simulate": False, "codex_bin": "no-such-codex", "concurrency": 2},
            lambda d: "config reload failed" in caplog.text,
        )
    assert daemon.services.cfg.concurrency == 4 and daemon.services.cfg.simulate
    assert "no-such-codex" in caplog.text


def test_log_lines_of_a_run_name_its_provider_session_once_known(lane: Lane) -> None:
    """An operator who greps the daemon's log for a run finds the CLI's conversation id
    there, from the moment the CLI named it (issue 39)."""
    task = lane.add("a task whose run logs after its session is known")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    root = logging.getLogger("lane_runner")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        daemon = Daemon(config.load(lane.root, {}), until=all_settled, notifier=Notifier(""))
        assert daemon.serve() == 0
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert lane.board.get_task(task.id).status is Status.DONE
    state = orjson.loads((lane.root / "lanes" / "work" / f"{task.id}.json").read_bytes())
    sessions = set(state["sessions"].values())
    records = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    of_run = [record for record in records if record.get("task") == task.id]
    assert of_run and any(record.get("session") in sessions for record in of_run), of_run
    assert all(record.get("session") is None for record in records if "task" not in record)


def test_a_reload_during_a_run_applies_to_the_next_claim_not_to_that_run(lane: Lane) -> None:
    """A run keeps the settings it was claimed under (docs/configuration.md, "What a
    reload changes"): its before_run hook holds it until the reload has landed, and its
    after_run hook is still the old one; the task claimed after the reload gets the new."""
    started, go, log = lane.root / "started", lane.root / "go", lane.root / "hooks.log"
    hold = f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done"

    def hooks(word: str) -> dict[str, object]:
        return {"*": {"before_run": hold, "after_run": f'echo "$LANE_TASK_ID {word}" >> {log}'}}

    lane.write_config(concurrency=1, hooks=hooks("old"))
    first = lane.add("claimed before the reload")
    later: list[str] = []

    def until(daemon: Daemon) -> bool:
        if not started.exists():
            return False
        if daemon.services.cfg.hooks == hooks("old") and not later:
            lane.write_config(hooks=hooks("new"))
            later.append("")  # one reload, raised once
            threading.Timer(0, signal.raise_signal, (signal.SIGHUP,)).start()
            return False
        if daemon.services.cfg.hooks == hooks("new") and not go.exists():
            later[0] = lane.add("claimed after the reload").id
            go.touch()
        return go.exists() and all_settled(daemon)

    daemon = Daemon(config.load(lane.root, {}), until=until, notifier=Notifier(""))
    assert daemon.serve() == 0
    assert log.read_text().splitlines() == [f"{first.id} old", f"{later[0]} new"]


def test_the_board_watcher_is_out_of_the_store_before_the_store_closes(lane: Lane) -> None:
    """The board watcher (a thread of its own) was left inside SQLite while the daemon
    closed the store on its way out: CI saw the daemon end in a segmentation fault there,
    and another not stop at all. Caught: serve returning without joining it."""
    lane.add("one task")
    daemon = Daemon(config.load(lane.root, {}), until=all_settled, notifier=Notifier(""))
    assert daemon.serve() == 0
    assert not [t for t in threading.enumerate() if t.name == "board-watch" and t.is_alive()]
