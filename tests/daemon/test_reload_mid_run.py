"""A reload while a run is running: the run keeps the router, the judge and the CLIs of
the configuration it was claimed under (``Services.hold``, ``Claimed.tools``); the
claims after the reload take the new ones (docs/configuration.md, "What a reload
changes"). In process, on a real SQLite board with the simulated CLIs."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.board.model import Claim
from lane_runner.daemon import Daemon
from lane_runner.router import HttpRouter
from lane_runner.run import workspace
from lane_runner.run.executor import RunExecutor
from lane_runner.service.notify import Notifier
from lane_runner.service.services import Services, build
from tests.daemon.test_daemon_loop import all_settled
from tests.harness import BOARD, Lane


@pytest.fixture
def services(lane: Lane, monkeypatch: pytest.MonkeyPatch) -> Iterator[Services]:
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("LANE_RUNNER_SIM_CONTROL", str(lane.control))
    cfg = config.load(lane.root, {}).replace(provider_preference=["claude", "codex"])
    built = build(cfg)
    yield built
    built.close()


def claim(services: Services) -> Claim:
    found = services.store.board(BOARD).claim(services.node, 60, "cli-auto")
    assert found is not None
    return found


def test_a_run_routes_by_the_router_of_its_claim_and_the_next_claim_by_the_new_one(
    services: Services, lane: Lane
) -> None:
    lane.add("claimed before the reload")
    before = RunExecutor(services, claim(services), services.cfg, services.hold())
    services.reload(services.cfg.replace(provider_preference=["codex", "claude"]))
    report = before.execute()
    services.let_go(before.c.tools)
    assert (report.ended, report.provider) == ("committed", "claude")
    lane.add("claimed after the reload")
    after = RunExecutor(services, claim(services), services.cfg, services.hold())
    report = after.execute()
    services.let_go(after.c.tools)
    assert (report.ended, report.provider) == ("committed", "codex")


def test_a_run_starts_the_cli_of_its_claim_though_a_reload_found_none(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The reload turns the simulators off where no real CLI is on PATH: every CLI of the
    new configuration is missing; the run claimed before it still runs its simulator."""
    lane.add("claimed before the reload")
    running = RunExecutor(services, claim(services), services.cfg, services.hold())
    nothing = tmp_path / "empty-path"
    nothing.mkdir()
    with monkeypatch.context() as scoped:
        scoped.setenv("PATH", str(nothing))
        services.reload(services.cfg.replace(simulate=False))
    assert set(services.binaries.values()) == {None}
    report = running.execute()
    services.let_go(running.c.tools)
    assert (report.ended, report.provider) == ("committed", "claude")


def test_a_run_commits_and_is_reviewed_by_the_settings_of_its_claim(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A reload changes the commit author and finds no CLI at all; the run claimed before
    it still commits as the first author (its ``settings``), and its review is asked of
    the other provider, chosen from the CLIs it holds (``Claimed.tools``). Caught: the
    verifier choosing the reviewer from ``Services.binaries`` (the run cooled down, "no
    provider is usable to review the result"); ``Accepted`` reading the commit author
    from ``Services.cfg`` (Bob's commit)."""
    services.reload(services.cfg.replace(commit_author="Ada <ada@example.org>", review="auto"))
    task = lane.add("claimed before the reload")
    running = RunExecutor(services, claim(services), services.cfg, services.hold())
    nothing = tmp_path / "empty-path"
    nothing.mkdir()
    with monkeypatch.context() as scoped:
        scoped.setenv("PATH", str(nothing))
        services.reload(services.cfg.replace(commit_author="Bob <bob@example.org>",
                                             simulate=False))
    assert set(services.binaries.values()) == {None}
    report = running.execute()
    services.let_go(running.c.tools)
    assert (report.ended, report.provider) == ("committed", "claude")
    tried = lane.lane_state(task.id)["attempts"]
    assert [(a["role"], a["provider"]) for a in tried] == [  # type: ignore[union-attr,index]
        ("implement", "claude"), ("review", "codex")]
    branch = workspace.branch_name(BOARD, task.id)
    said = subprocess.run(["git", "log", "-1", "--format=%an <%ae>", branch], cwd=lane.repo,
                          capture_output=True, text=True, check=True)
    assert said.stdout.strip() == "Ada <ada@example.org>"


def test_a_replaced_router_closes_with_the_last_run_that_holds_it(
    lane: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing listens on the router's port: no routing call is made, only clients built."""
    monkeypatch.setenv("IS_SANDBOX", "1")
    cfg = config.load(lane.root, {}).replace(router_url="http://127.0.0.1:9/v1")
    services = build(cfg)
    try:
        first = services.hold()
        second = services.hold()
        services.reload(cfg)
        held = first.router
        assert isinstance(held, HttpRouter) and not held.closed
        services.let_go(first)
        assert not held.closed  # the second run still routes through it
        services.let_go(second)
        assert held.closed
        unheld = services.router
        services.reload(cfg)
        assert isinstance(unheld, HttpRouter) and unheld.closed  # no run held it
    finally:
        services.close()


def test_the_daemon_holds_the_router_of_a_claim_through_a_reload(
    lane: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's own path (``Daemon._submit`` holds, ``_execute`` lets go): the run's
    before_run hook holds it, before it routes, until a reload reversing the provider
    preference has landed; it still goes to the provider first preferred at its claim,
    and the task claimed after the reload to the new first one."""
    monkeypatch.setenv("IS_SANDBOX", "1")  # the simulated claude runs as root
    started, go = lane.root / "started", lane.root / "go"
    hold = f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done"
    lane.write_config(
        concurrency=1, hooks={"*": {"before_run": hold}}, provider_preference=["claude", "codex"]
    )
    first = lane.add("claimed before the reload")
    later: list[str] = []

    def until(daemon: Daemon) -> bool:
        if not started.exists():
            return False
        if daemon.services.cfg.provider_preference[0] == "claude" and not later:
            lane.write_config(
                concurrency=1,
                hooks={"*": {"before_run": hold}},
                provider_preference=["codex", "claude"],
            )
            later.append("")  # one reload, raised once
            threading.Timer(0, signal.raise_signal, (signal.SIGHUP,)).start()
            return False
        if daemon.services.cfg.provider_preference[0] == "codex" and not go.exists():
            later[0] = lane.add("claimed after the reload").id
            go.touch()
        return go.exists() and all_settled(daemon)

    daemon = Daemon(config.load(lane.root, {}), until=until, notifier=Notifier(""))
    assert daemon.serve() == 0
    assert routed(lane, first.id) == ["claude"]
    assert routed(lane, later[0]) == ["codex"]


def routed(lane: Lane, task_id: str) -> list[str]:
    """The providers a task's runs were routed to, from the route notes on its board."""
    notes = [c.body for c in lane.board.comments(task_id) if c.body.startswith("route: ")]
    return [note.removeprefix("route: ").split("/")[0] for note in notes]
