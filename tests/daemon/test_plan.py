"""The attempt plan the executor and the dry run share (``run/plan.py``): what it decides
from the route, the configuration and the lane state alone."""

from __future__ import annotations

from pathlib import Path

from lane_runner import config
from lane_runner.board.model import Status, Task
from lane_runner.home import Home
from lane_runner.router import Route
from lane_runner.run import plan


def route(provider: str) -> Route:
    return Route(provider, "m-1", "low", f"{provider}-low", "static", "test", 0)


def test_a_cli_that_names_no_session_resumes_only_what_it_started(tmp_path: Path) -> None:
    cfg, home = config.load(tmp_path, {}), Home(tmp_path)
    binaries = {"codex": tmp_path / "codex", "claude": tmp_path / "claude"}
    fresh = plan.plan_attempt(route("codex"), cfg, home, binaries, {}, {})
    assert (fresh.session_id, fresh.reserved, fresh.resume, fresh.unusable) == (
        None, False, False, None)
    again = plan.plan_attempt(route("codex"), cfg, home, binaries, {"codex": "t-1"},
                              {"codex": True})
    assert (again.session_id, again.resume) == ("t-1", True)
    assert again.settings_path == home.settings_file("codex")


def test_a_reserved_session_is_new_and_never_resumed(tmp_path: Path) -> None:
    cfg, home = config.load(tmp_path, {}).replace(worker_user="nobody"), Home(tmp_path)
    binaries = {"claude": tmp_path / "claude"}
    reserved = plan.plan_attempt(route("claude"), cfg, home, binaries, {}, {"claude": True})
    assert reserved.reserved and reserved.session_id and not reserved.resume
    kept = plan.plan_attempt(route("claude"), cfg, home, binaries,
                             {"claude": reserved.session_id}, {})
    assert (kept.session_id, kept.reserved, kept.resume) == (reserved.session_id, False, False)


def test_a_cli_not_installed_is_unusable_and_says_how_to_fix_it(tmp_path: Path) -> None:
    cfg, home = config.load(tmp_path, {}), Home(tmp_path)
    missing = plan.plan_attempt(route("codex"), cfg, home, {"codex": None}, {}, {})
    assert missing.executable is None
    assert missing.unusable == "the codex CLI is not installed: install it or set codex_bin"


def test_the_result_file_leaves_the_journal_to_a_worker_user(tmp_path: Path) -> None:
    home = Home(tmp_path)
    task = Task("t1", "b", "title", "", Status.READY, "cli-auto", 0, (), None, None, 1, None,
                None, None, None, None, None, None, 0, 0.0, 0.0)
    own = plan.result_file(config.load(tmp_path, {}), home, task, 3, 7)
    assert own == home.lane_dir("b") / "t1.run-3.provider-7.result.json"
    worker = config.load(tmp_path, {}).replace(worker_user="nobody")
    assert plan.result_file(worker, home, task, "<R>", "<n>") == (
        home.worktree("b", "t1").parent / ".t1.run-<R>.provider-<n>.result.json")
