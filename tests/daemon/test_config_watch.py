"""Configuration changes apply without a signal (issue 39): the daemon notices its file
changed (an edit, a ConfigMap's link swap), reloads, keeps the last good configuration
when the new one is bad, and says in ``status`` what waits for a restart."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.daemon import Daemon
from lane_runner.home import Home
from lane_runner.service import status
from lane_runner.service.config_watch import ConfigWatch
from lane_runner.service.notify import Notifier
from tests.harness import Lane

Step = Callable[[], None]


def serve_through(lane: Lane, steps: list[tuple[Step, Callable[[Daemon], bool]]]) -> Daemon:
    """Serve; each step's change is made once the one before it has shown (30 s each)."""
    pending = list(steps)
    deadline = [0.0]

    def until(daemon: Daemon) -> bool:
        now = time.monotonic()
        if deadline[0] == 0.0 or pending and pending[0][1](daemon):
            if deadline[0] != 0.0:
                pending.pop(0)
            if not pending:
                return True
            pending[0][0]()
            deadline[0] = now + 30
        return now > deadline[0]

    daemon = Daemon(config.load(lane.root, {}), until=until, notifier=Notifier(""))
    assert daemon.serve() == 0
    assert not pending, "a change was never taken"
    return daemon


def shown_config(lane: Lane) -> dict[str, object]:
    """What ``status`` reads of the configuration, from the daemon's published document."""
    found = status.read(Home(lane.root).status_file) or {}
    return found.get("config") or {}


def test_an_edit_is_taken_without_a_signal(lane: Lane) -> None:
    daemon = serve_through(lane, [
        (lambda: lane.write_config(concurrency=2), lambda d: d.cfg.concurrency == 2),
    ])
    assert daemon.services.cfg.concurrency == 2


def test_a_bad_file_keeps_the_last_good_one_and_status_says_why(lane: Lane) -> None:
    lane.write_config(concurrency=3)

    def broken() -> None:
        (lane.root / "config.toml").write_text("concurrency = 'two'\n")

    seen: list[object] = []

    def said(daemon: Daemon) -> bool:
        seen.append(shown_config(lane).get("error"))
        return bool(seen[-1])

    daemon = serve_through(lane, [(broken, said)])
    assert daemon.cfg.concurrency == 3
    assert "bad value for concurrency" in str(seen[-1])


def test_a_key_that_needs_a_restart_is_named(lane: Lane) -> None:
    daemon = serve_through(lane, [
        (lambda: lane.write_config(failure_limit=9),
         lambda d: shown_config(lane).get("restart_needed") == ["failure_limit"]),
    ])
    assert daemon.services.cfg.failure_limit == 3


def configmap(directory: Path, text: str, version: int) -> None:
    """What the kubelet does: a new timestamped folder, ``..data`` swapped to it by rename."""
    folder = directory / f"..2026_12_03_{version}"
    folder.mkdir()
    (folder / "config.toml").write_text(text)
    link = directory / f"..data_tmp{version}"
    link.symlink_to(folder.name)
    os.replace(link, directory / "..data")
    if not (directory / "config.toml").is_symlink():
        (directory / "config.toml").symlink_to("..data/config.toml")


def test_a_configmap_link_swap_is_taken(
    lane: Lane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    configmap(mounted, "simulate = true\nconcurrency = 3\n", 1)
    monkeypatch.setenv("LANE_RUNNER_CONFIG", str(mounted / "config.toml"))
    daemon = serve_through(lane, [
        (lambda: configmap(mounted, "simulate = true\nconcurrency = 2\n", 2),
         lambda d: d.cfg.concurrency == 2),
    ])
    assert daemon.cfg.concurrency == 2


def test_the_watch_sees_an_edit_a_swap_and_a_removal(tmp_path: Path) -> None:
    configmap(tmp_path, "a = 1\n", 1)
    watch = ConfigWatch.of(tmp_path, {"LANE_RUNNER_CONFIG": str(tmp_path / "config.toml")})
    assert not watch.changed()
    configmap(tmp_path, "a = 1\n", 2)  # same text, a new file behind the link
    assert watch.changed() and not watch.changed()
    (tmp_path / "..2026_12_03_2" / "config.toml").unlink()
    assert watch.changed() and watch.seen is None
