"""Pure decisions behind the operator commands: recovery plans, daemon trust, doctor verdicts,
log rendering and log formats."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path

import orjson
import pytest

from journal import Entry
from lane_runner.board.model import Status
from lane_runner.cli import doctor, doctor_clis, transcript
from lane_runner.cli.checks import Check, Level, exit_status
from lane_runner.cli.inspection import BoardView, explain, needs_attention
from lane_runner.service import logs, status
from lane_runner.service.lock import Holder


def entry(kind: str, valid: bool = True, reason: str | None = None, run: int = 7) -> Entry:
    return Entry(Path("/x"), "work", "n", kind, "regular", "t1", run, 10, 1.0, valid, reason, None)


@pytest.mark.parametrize(
    ("view", "action", "words"),
    [
        (BoardView(task_status=Status.RUNNING, current_run_id=7), "commit", "completes"),
        (
            BoardView(task_status=Status.DONE, completed_run_id=7, result_matches=True),
            "settle-committed",
            "already recorded",
        ),
        (
            BoardView(task_status=Status.READY, latest_ended_run_id=7),
            "commit",
            "replayed",
        ),
        (
            BoardView(task_status=Status.DONE, completed_run_id=9),
            "conflict",
            "will not take run 7",
        ),
        (BoardView(error="database is locked"), "wait", "database is locked"),
        (BoardView(), "conflict", "no such task"),
    ],
)
def test_a_pending_record_follows_the_board(view: BoardView, action: str, words: str) -> None:
    plan = explain(entry("pending"), view)
    assert plan.action == action
    assert words in plan.why


def test_prepared_evidence_is_replayed_first() -> None:
    plan = explain(entry("prepared"), BoardView(task_status=Status.RUNNING, current_run_id=7))
    assert plan.action == "commit" and "oldest first" in plan.why


def test_an_untrusted_pending_record_is_quarantined_and_its_run_retried() -> None:
    plan = explain(entry("pending", valid=False, reason="schema-invalid"), None)
    assert plan.action == "quarantine and make the run retryable"
    assert "schema-invalid" in plan.why and "run 7" in plan.why


def test_staging_promotes_only_records_that_carry_a_result() -> None:
    running = BoardView(task_status=Status.RUNNING, current_run_id=7)
    assert explain(entry("staging"), running, "pending").action.startswith("promote")
    assert explain(entry("staging"), running, "committed").action == "finish-retirement"
    assert explain(entry("staging", False, "untrusted-staging"), None).action == "quarantine"


def test_settled_and_lane_files_are_kept() -> None:
    for kind in ("committed", "conflict", "lane-state", "candidate", "quarantine-diagnostic"):
        assert explain(entry(kind), None).action == "keep"
    assert explain(entry("malformed", False, "malformed-name"), None).action == "quarantine"


def test_attention_means_unfinished_or_invalid() -> None:
    assert needs_attention(entry("pending"))
    assert needs_attention(entry("staging"))
    assert needs_attention(entry("committed", valid=False, reason="digest-mismatch"))
    assert not needs_attention(entry("committed"))
    assert not needs_attention(entry("quarantine-diagnostic"))


# -- whom status.json speaks for ---------------------------------------------------


def test_status_is_trusted_only_from_the_lock_holder() -> None:
    live = Holder(41, "daemon", 5.0)
    published = {"pid": 41, "active": []}
    assert status.judge(live, None, published).state is status.DaemonState.RUNNING
    assert status.judge(live, None, published).published == published
    other = status.judge(live, None, {"pid": 40})
    assert other.state is status.DaemonState.STARTING and other.published is None
    stale = status.judge(None, {"pid": 41, "command": "daemon"}, published)
    assert stale.state is status.DaemonState.STALE and stale.published is None
    stopped = status.judge(None, {"pid": 41, "command": "daemon"}, None)
    assert stopped.state is status.DaemonState.STOPPED and "pid 41" in stopped.detail
    recovering = status.judge(Holder(3, "recover", 1.0), None, None)
    assert recovering.state is status.DaemonState.RECOVERING


def test_publisher_writes_changes_at_most_once_per_interval(tmp_path: Path) -> None:
    publisher = status.Publisher(tmp_path / "status.json", interval=1.0)
    assert publisher.publish({"a": 1}, now=100.0)
    assert not publisher.publish({"a": 2}, now=100.5)  # too soon
    assert not publisher.publish({"a": 1}, now=102.0)  # unchanged
    assert publisher.publish({"a": 2}, now=102.0)
    assert status.read(tmp_path / "status.json")["a"] == 2  # type: ignore[index]
    publisher.withdraw()
    assert status.read(tmp_path / "status.json") is None


# -- doctor verdicts ---------------------------------------------------------------


def test_parser_verdict_fails_on_unknown_options_only() -> None:
    assert doctor_clis.parser_verdict("claude", "Usage: claude [options]").level is Level.PASS
    rejected = doctor_clis.parser_verdict("claude", "x\nerror: unknown option '--effort'\n")
    assert rejected.level is Level.FAIL and "--effort" in rejected.detail
    clap = doctor_clis.parser_verdict("codex", "error: unexpected argument '--json' found")
    assert clap.level is Level.FAIL


def test_mode_and_disk_verdicts(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    st = os.stat(tmp_path)
    assert doctor.mode_verdict(tmp_path, st, st.st_uid).level is Level.PASS
    assert doctor.mode_verdict(tmp_path, st, st.st_uid + 1).level is Level.FAIL
    os.chmod(tmp_path, 0o755)
    assert doctor.mode_verdict(tmp_path, os.stat(tmp_path), st.st_uid).level is Level.WARN
    os.chmod(tmp_path, 0o711)  # a worker user passes through to its worktrees
    assert doctor.mode_verdict(tmp_path, os.stat(tmp_path), st.st_uid).level is Level.WARN
    passes = doctor.mode_verdict(tmp_path, os.stat(tmp_path), st.st_uid, "nobody")
    assert passes.level is Level.PASS
    assert doctor.disk_verdict(tmp_path, 10 << 30).level is Level.PASS
    assert doctor.disk_verdict(tmp_path, 512 << 20).level is Level.WARN
    assert doctor.disk_verdict(tmp_path, 1 << 20).level is Level.FAIL


def test_exit_status_is_one_on_failure_and_on_warning_when_strict() -> None:
    ok = Check("a", Level.PASS, "")
    warn = Check("b", Level.WARN, "")
    fail = Check("c", Level.FAIL, "")
    assert exit_status([ok, warn], strict=False) == 0
    assert exit_status([ok, warn], strict=True) == 1
    assert exit_status([ok, fail], strict=False) == 1
    assert doctor_clis.root_verdict("refuses").level is Level.FAIL


# -- rendering provider logs ---------------------------------------------------------


def test_codex_and_claude_events_become_readable_lines() -> None:
    command = {
        "type": "item.completed",
        "item": {"type": "command_execution", "command": "pytest -q", "exit_code": 1},
    }
    assert transcript.render(orjson.dumps(command).decode()) == "$ pytest -q (exit 1)"
    assert transcript.render('{"type":"turn.started"}') is None
    tool = {  # every claude event names its session (what tells it from gemini's)
        "type": "assistant", "session_id": "s",
        "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]},
    }
    assert transcript.render(orjson.dumps(tool).decode()) == "tool Bash: ls"
    failed = {"type": "result", "session_id": "s", "is_error": True, "result": "Not logged in"}
    assert transcript.render(orjson.dumps(failed).decode()) == "result FAILED: Not logged in"
    assert transcript.render("[stderr] boom") == "[stderr] boom"
    assert transcript.render("{not json") == "{not json"


# -- structured logs -----------------------------------------------------------------


def test_log_format_follows_systemd_unless_asked() -> None:
    assert logs.choose_format(None, {"JOURNAL_STREAM": "8:1"}, stderr_is_tty=False) == "json"
    assert logs.choose_format(None, {}, stderr_is_tty=False) == "text"
    assert logs.choose_format("text", {"JOURNAL_STREAM": "8:1"}, stderr_is_tty=False) == "text"


def test_json_lines_carry_the_run_context() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("lane_runner.test_operator")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with logs.run_context("work", "t1", 7):
            logger.info("hello %s", "there")
        logger.info("board only", extra=logs.about("other"))
    finally:
        logger.removeHandler(handler)
    first, second = (orjson.loads(line) for line in stream.getvalue().splitlines())
    assert first["event"] == "hello there" and first["level"] == "info"
    assert (first["board"], first["task"], first["run"]) == ("work", "t1", 7)
    assert "timestamp" in first
    assert second["board"] == "other" and "task" not in second


def test_doctor_reports_a_provider_the_runner_found_misconfigured() -> None:
    from lane_runner.router.health import ProviderHealth

    said = "Error: --json-schema is not a valid JSON Schema: no schema with key or ref"
    refused = ProviderHealth("claude", "unavailable", True, said, 1000.0, misconfigured=True)
    check = doctor.health_verdict(refused, 1060.0)
    assert check is not None and check.level is Level.FAIL and said in check.detail
    logged_out = ProviderHealth("claude", "unavailable", False, "Not logged in", 1000.0)
    assert doctor.health_verdict(logged_out, 1060.0) is None  # listed, not a failure
    busy = ProviderHealth("codex", "unavailable", True, "usage limit", 1000.0)
    assert doctor.health_verdict(busy, 1060.0) is None
    assert doctor.health_verdict(refused, 1000.0 + 13 * 3600) is None  # stale


def test_doctor_says_which_isolation_applies() -> None:
    """Catches: a sandbox asked for and unavailable passing doctor (no attempt would
    start), and less than a sandbox passing silently."""
    assert doctor.isolation_verdict("sandbox", "available", None, False).level is \
        doctor.Level.PASS
    refused = doctor.isolation_verdict("sandbox", "set", "isolation = sandbox, but no bwrap",
                                       False)
    assert refused.level is doctor.Level.FAIL and "no bwrap" in refused.detail
    assert doctor.isolation_verdict("user", "no bwrap", None, False).level is doctor.Level.WARN
    assert doctor.isolation_verdict("none", "no bwrap", None, True).level is doctor.Level.PASS


@pytest.mark.parametrize(
    ("said", "level"),
    [
        ("git version 2.39.5\n", Level.PASS),
        ("git version 2.53.1\n", Level.PASS),
        ("git version 2.54.0\n", Level.WARN),  # hooks defined in configuration
        ("git version 3.0.0.windows.1\n", Level.WARN),
        ("", Level.FAIL),
    ],
)
def test_the_git_verdict_warns_of_a_git_that_runs_configured_hooks(
    said: str, level: Level
) -> None:
    """Caught: a git from 2.54 on passed (its configured hooks are out of the runner's
    reach), or no git at all passed."""
    verdict = doctor.git_verdict(said, "No such file or directory: 'git'")
    assert verdict.level is level
    if level is not Level.PASS:
        assert verdict.fix


def test_doctor_names_the_git_the_runner_runs() -> None:
    """The real git, through the runner's own git call."""
    checked = doctor.git_check()
    assert checked.name == "git" and checked.level is not Level.FAIL, checked
    assert checked.detail.startswith("git ")
