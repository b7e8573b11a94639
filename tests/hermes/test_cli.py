"""The operator's commands against a Hermes board: what reads works, what writes is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lane_runner.board.hermes import home as hermes_home
from lane_runner.board.hermes.home import HermesUnusable
from lane_runner.home import Home
from tests.harness import FAST_CONFIG, toml_value
from tests.hermes.conftest import HermesHome


def lane_runner(root: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    Home(root).ensure()
    config = {**FAST_CONFIG, "board_url": url}
    (root / "config.toml").write_text(
        "".join(f"{k} = {toml_value(v)}\n" for k, v in config.items())
    )
    return subprocess.run(
        [sys.executable, "-m", "lane_runner.cli.main", "--home", str(root), *args],
        env={"PATH": "/usr/bin:/bin", "HOME": str(root), "IS_SANDBOX": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_reading_commands_work_and_writing_ones_name_the_hermes_command(
    hermes_home: HermesHome, tmp_path: Path
) -> None:
    task_id = hermes_home.create("fix it", "--assignee", "cli-codex-low", "--priority", "3")
    url, root = f"hermes://{hermes_home.path}", tmp_path / "runner"
    listed = lane_runner(root, url, "task", "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    (task,) = json.loads(listed.stdout)
    assert (task["id"], task["board"], task["status"], task["priority"]) == (
        task_id,
        "default",
        "ready",
        3,
    )
    shown = lane_runner(root, url, "task", "show", task_id, "--board", "default", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["title"] == "fix it"
    for args in (
        ["status"],
        ["journal", "verify"],
        ["journal", "ls"],
        ["recover"],
        ["board", "ls"],
    ):
        assert lane_runner(root, url, *args).returncode == 0, args
    refusals = {
        ("task", "add", "--title", "x", "--board", "default"): "hermes kanban create",
        ("task", "unblock", task_id, "--board", "default"): f"hermes kanban unblock {task_id}",
        ("task", "archive", task_id, "--board", "default"): f"hermes kanban archive {task_id}",
        ("board", "create", "more"): "hermes kanban boards create more",
    }
    for args, hint in refusals.items():
        refused = lane_runner(root, url, *args)
        assert (refused.returncode, hint in refused.stderr) == (2, True), refused.stderr
    db = hermes_home.db()
    assert db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 1


def test_doctor_checks_the_home_the_release_and_lane_named_profiles(
    hermes_home: HermesHome, tmp_path: Path
) -> None:
    root = tmp_path / "runner"
    good = lane_runner(root, f"hermes://{hermes_home.path}", "doctor", "--json")
    checks = {check["name"]: check for check in json.loads(good.stdout)["checks"]}
    assert checks["hermes home"]["level"] == "pass"
    assert "hermes-agent 0.19" in checks["hermes home"]["detail"]
    assert checks["board default"]["level"] == "pass"
    (hermes_home.path / "profiles" / "cli-auto").mkdir(parents=True)
    warned = lane_runner(root, f"hermes://{hermes_home.path}", "doctor", "--json")
    checks = {check["name"]: check for check in json.loads(warned.stdout)["checks"]}
    assert (
        checks["hermes profiles"]["level"] == "warn"
        and "cli-auto" in checks["hermes profiles"]["detail"]
    )
    bad = lane_runner(root, f"hermes://{tmp_path}", "doctor", "--json")
    checks = {check["name"]: check for check in json.loads(bad.stdout)["checks"]}
    assert checks["board store"]["level"] == "fail"
    assert "not a Hermes home" in checks["board store"]["detail"]
    assert not (tmp_path / "kanban.db").exists()


def test_releases_outside_the_tested_range_are_refused_with_the_range() -> None:
    hermes_home.check_version("0.19.0")
    hermes_home.check_version("0.19.7")
    for version, words in (("0.18.9", "too old"), ("0.20.0", "newer"), ("1.0", "newer")):
        try:
            hermes_home.check_version(version)
        except HermesUnusable as error:
            assert words in str(error) and ">=0.19,<0.20" in str(error)
        else:
            raise AssertionError(f"{version} was accepted")


def test_a_hermes_without_the_exact_run_api_is_refused() -> None:
    from hermes_cli import kanban_db

    hermes_home.check_api(kanban_db)

    class Older:
        def complete_task(self, conn: object, task_id: str, *, result: str = "") -> bool:
            return False

    try:
        hermes_home.check_api(Older())  # type: ignore[arg-type]
    except HermesUnusable as error:
        assert "complete_task(metadata=)" in str(error) and "claim_task" in str(error)
    else:
        raise AssertionError("an API without expected_run_id was accepted")
