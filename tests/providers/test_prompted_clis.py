"""opencode and the Gemini CLI (issue 43): what the pinned binaries said offline, read and
classified as the runner must; their answer asked for in the prompt and repaired once in
the same session; their sessions, usage, quotas and liveness, through the simulators."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from lane_runner.providers import Attempt, Classification, adapter, prompted, resets, run_attempt
from lane_runner.providers import gemini as gemini_module
from lane_runner.providers import opencode as opencode_module
from lane_runner.providers.reading import Reading
from lane_runner.providers.run import conclude
from lane_runner.providers.simulators import play
from lane_runner.providers.supervisor import Ended
from lane_runner.providers.usage import UsageReport
from tests.providers.conftest import RequestFactory

FIXTURES = Path(__file__).parent / "fixtures" / "real-cli"
SESSION = "0199a213-81c0-7800-8aa1-bbab2a035a53"


def replay(name: str) -> Reading:
    """One captured run fed to its adapter: stdout's events, then stderr's lines."""
    cli = adapter(name.split("-")[0])
    reading = Reading(model="scripted:m1")
    for line in (FIXTURES / f"{name}.stdout").read_text().splitlines():
        if line.startswith("{"):
            cli.observe(reading, json.loads(line))
    for line in (FIXTURES / f"{name}.stderr").read_text().splitlines():
        cli.observe_stderr(reading, line)
    return reading


def verdict(name: str, stopped: Classification | None = None) -> Attempt:
    reading = replay(name)
    status = int((FIXTURES / f"{name}.status").read_text())
    ended = Ended(exit_status=None if stopped else status, signal=None, stopped=stopped,
                  stop_reason="no meaningful event for 90s" if stopped else "",
                  stderr=(FIXTURES / f"{name}.stderr").read_text(), tail="", pid=1)
    return conclude(reading, ended, None)


@pytest.mark.parametrize(
    ("name", "classification", "words"),
    [
        ("opencode-answer", Classification.OK, "completed: made it"),
        ("opencode-resume-unknown", Classification.SESSION_MISSING, "Session not found"),
        ("opencode-model-missing", Classification.MISCONFIGURED, "Model not found"),
        ("opencode-unknown-option", Classification.MISCONFIGURED, "opencode run [message..]"),
        ("gemini-answer", Classification.OK, "completed: made it"),
        ("gemini-quota", Classification.CAPACITY, "exhausted your daily quota"),
        ("gemini-resume-unknown", Classification.SESSION_MISSING, "No previous sessions"),
        ("gemini-session-taken", Classification.SESSION_COLLISION, "already exists"),
        ("gemini-unknown-option", Classification.MISCONFIGURED, "Unknown argument: bogus"),
        ("gemini-not-logged-in", Classification.AUTH, "Please set an Auth method"),
        ("gemini-gateway-auth", Classification.MISCONFIGURED, "Invalid auth method selected"),
    ],
)
def test_each_real_output_is_classified(name: str, classification: Classification,
                                        words: str) -> None:
    attempt = verdict(name)
    assert (attempt.classification, words in attempt.reason) == (classification, True), (
        attempt.reason)


def test_opencodes_silent_quota_hang_is_capacity_not_a_stall() -> None:
    """opencode retries a spent quota for ever, printing nothing on stdout: its log line
    ends the attempt as capacity at once (the supervisor asks ``gave_up``), and a stall
    after such a line is capacity too, never a stall the task is blamed for."""
    from lane_runner.providers.classify import gave_up

    reading = replay("opencode-quota-hang")
    said = gave_up(reading.signals)
    assert said is not None and said[0] is Classification.CAPACITY
    stalled = verdict("opencode-quota-hang", stopped=Classification.STALLED)
    assert stalled.classification is Classification.CAPACITY
    assert "exceeded your current quota" in stalled.reason
    assert reading.limit is not None and "quota" in reading.limit.words


def test_a_stall_without_capacity_words_stays_a_stall() -> None:
    reading = Reading()
    reading.signals.add_error("opencode stream error: AI_APICallError: Cannot connect to API")
    ended = Ended(exit_status=None, signal=None, stopped=Classification.STALLED,
                  stop_reason="no meaningful event for 90s", stderr="", tail="", pid=1)
    assert conclude(reading, ended, None).classification is Classification.STALLED


def test_the_usage_of_each_step_and_invocation_reaches_the_ledger_in_its_kinds() -> None:
    """opencode's input leaves out the cache and its output the reasoning; gemini's input
    has the cached tokens in it and its total the thinking: the ledger's kinds are apart."""
    steps = replay("opencode-answer").usage
    assert [report.models["scripted:m1"]["input"] for report in steps] == [1000, 2000]
    assert all(report.basis == "message" and report.key for report in steps)
    assert len({report.key for report in steps}) == 2
    [invocation] = replay("gemini-answer").usage
    assert invocation.models["gemini-2.5-flash"]["input"] == 3000
    assert invocation.models["gemini-2.5-flash"]["output"] == 100
    assert invocation.cost_usd == {}, "gemini says no cost: the price table prices it"
    part = {"id": "prt_1", "cost": 0, "tokens": {"input": 700, "output": 30, "reasoning": 20,
                                                 "cache": {"read": 300, "write": 0}}}
    report = opencode_module.usage_of(part, "ses_1", "scripted:m1")
    assert isinstance(report, UsageReport) and report.cost_usd == {}
    assert report.models["scripted:m1"] == {"input": 700, "cached_input": 300,
                                            "cache_write": 0, "output": 50, "reasoning": 20}
    stats = {"timestamp": "t", "stats": {"models": {"gemini-2.5-pro": {
        "input_tokens": 1000, "cached": 300, "output_tokens": 50, "total_tokens": 1070}}}}
    report = gemini_module.usage_of(stats, SESSION)
    assert report is not None and report.models["gemini-2.5-pro"] == {
        "input": 700, "cached_input": 300, "cache_write": 0, "output": 70, "reasoning": 20}


def test_a_wait_said_as_a_span_is_a_reset_moment() -> None:
    assert resets.after_delay("Please retry in 3h2m1s.", 100.0) == 100.0 + 10921
    assert resets.after_delay('"retryDelay": "10921s"', 0.0) == 10921
    assert resets.after_delay("try again in 5 minutes", 0.0) == 300
    assert resets.after_delay("retry in 3 months", 0.0) is None
    assert replay("gemini-quota").limit is not None
    quota = replay("gemini-quota").limit
    assert quota is not None and quota.resets_at is not None


@pytest.mark.parametrize("name", ["opencode", "gemini"])
def test_a_reply_not_in_the_schema_gets_one_repair_turn_in_the_same_session(
    name: str, make_request: RequestFactory
) -> None:
    req = make_request(name, session_id=SESSION, model="gemini-2.5-flash")
    starts: list[tuple[list[str], str | None]] = []

    def run_once(argv: list[str], result_file: Path | None, prompt: str | None = None
                 ) -> Attempt:
        starts.append((argv, prompt))
        return Attempt(Classification.FAILED, "CLI ended cleanly without a structured result",
                       None, 0, None, "ses_named", "", repairable=True)

    attempt = adapter(name).attempt(req, run_once)
    assert len(starts) == 1 + prompted.REPAIR_TURNS == 2, "one repair turn, not a loop"
    (first, asked), (again, repair) = starts
    assert asked is not None and asked.startswith(req.prompt) and '"status"' in asked
    assert repair is not None and repair.startswith(play.REPAIR)
    assert "without a structured result" in repair
    resumed = "--session" if name == "opencode" else "-r"
    assert resumed not in first and again[again.index(resumed) + 1] == "ses_named"
    assert attempt.classification is Classification.FAILED


@pytest.mark.parametrize("name", ["opencode", "gemini"])
def test_an_answer_or_a_failure_is_not_repaired(name: str, make_request: RequestFactory
                                                ) -> None:
    req = make_request(name, session_id=SESSION)
    for first in (Attempt(Classification.OK, "", {"status": "completed"}, 0, None, "s", ""),
                  Attempt(Classification.CAPACITY, "quota", None, 1, None, "s", "")):
        starts: list[list[str]] = []

        def run_once(argv: list[str], result_file: Path | None, prompt: str | None = None,
                     first: Attempt = first, starts: list[list[str]] = starts) -> Attempt:
            starts.append(argv)
            return first

        assert adapter(name).attempt(req, run_once) is first and len(starts) == 1


def test_argv_fresh_and_resumed(make_request: RequestFactory) -> None:
    cli = adapter("opencode")
    req = make_request("opencode", model="scripted:m1", effort="xhigh", session_id="ses_1")
    fresh = cli.argv(req, resume=False, result_file=req.result_file, schema="")
    resumed = cli.argv(req, resume=True, result_file=req.result_file, schema="")
    assert fresh[fresh.index("-m") + 1] == "scripted/m1", "provider:model is provider/model"
    assert fresh[fresh.index("--variant") + 1] == "max" and "--session" not in fresh
    assert resumed[-2:] == ["--session", "ses_1"]
    low = cli.argv(make_request("opencode", effort="low"), resume=False,
                   result_file=req.result_file, schema="")
    assert "--variant" not in low
    cli = adapter("gemini")
    req = make_request("gemini", model="gemini-2.5-pro", session_id=SESSION)
    assert cli.argv(req, resume=False, result_file=req.result_file, schema="")[-2:] == [
        "--session-id", SESSION]
    assert cli.argv(req, resume=True, result_file=req.result_file, schema="")[-2:] == [
        "-r", SESSION]


def test_the_deny_list_reaches_each_cli_in_its_own_words(make_request: RequestFactory,
                                                          tmp_path: Path) -> None:
    permission = json.loads(adapter("opencode").run_env(make_request("opencode"))[
        "OPENCODE_PERMISSION"])
    assert permission["bash"]["git push --force*"] == "deny"
    assert list(permission["bash"])[0] == "*", "the allow-all first: a later rule wins"
    req = make_request("gemini", session_id=SESSION,
                       env={"HOME": str(tmp_path / "worker"), "PATH": "/usr/bin:/bin"})
    adapter("gemini").prepare(req)
    policy = (tmp_path / "worker" / ".gemini" / "policies" / "lane-runner.toml").read_text()
    assert 'commandPrefix = "git reset --hard"' in policy and 'decision = "deny"' in policy


def test_tool_clocks_run_while_a_step_or_a_tool_is_open() -> None:
    tools: set[str] = set()
    opencode = adapter("opencode")
    opencode.track_tools(tools, {"type": "step_start", "part": {"messageID": "m1"}})
    assert tools == {"m1"}
    opencode.track_tools(tools, {"type": "step_finish", "part": {"messageID": "m1"}})
    assert tools == set()
    gemini = adapter("gemini")
    gemini.track_tools(tools, {"type": "tool_use", "tool_id": "t1"})
    assert tools == {"t1"}
    gemini.track_tools(tools, {"type": "tool_result", "tool_id": "t1"})
    assert tools == set()


def test_gemini_at_a_gateway_needs_its_api_key_auth_selected(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
           "GEMINI_API_KEY": "k"}
    cli = adapter("gemini")
    url, problems = cli.gateway({}, env)
    assert url == "http://127.0.0.1:9" and "selects the API-key auth" in problems[0]
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(gemini_module.GATEWAY_AUTH)
    assert cli.gateway({}, env) == ("http://127.0.0.1:9", [])
    assert cli.gateway({}, {**env, "GEMINI_API_KEY": ""})[1]


# -- through the simulators, as real subprocesses -------------------------------------


@pytest.mark.parametrize("name", ["opencode", "gemini"])
def test_each_simulated_cli_answers_and_names_its_session(
    name: str, make_request: RequestFactory
) -> None:
    usage: list[UsageReport] = []
    sessions: list[str] = []
    req = make_request(name, session_id=str(uuid.uuid4()) if name == "gemini" else None,
                       on_usage=usage.append, on_session=sessions.append)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason
    assert attempt.structured is not None and attempt.structured["status"] == "completed"
    assert attempt.session_id and sessions[-1] == attempt.session_id
    assert usage and all(report.basis == "message" for report in usage)


@pytest.mark.parametrize("name", ["opencode", "gemini"])
def test_prose_is_repaired_in_the_same_session(name: str, make_request: RequestFactory
                                               ) -> None:
    req = make_request(name, prompt="Fix the bug [sim:prose]",
                       session_id=str(uuid.uuid4()) if name == "gemini" else None)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason
    resumed = "--session" if name == "opencode" else "-r"
    assert attempt.argv[attempt.argv.index(resumed) + 1] == attempt.session_id
    log = req.log_path.read_text()
    assert log.count(f"starting {name}") == 2


@pytest.mark.parametrize("name", ["opencode", "gemini"])
def test_a_spent_quota_is_capacity_with_its_reset(name: str, make_request: RequestFactory
                                                  ) -> None:
    req = make_request(name, prompt="Fix the bug [sim:capacity:3600]",
                       session_id=str(uuid.uuid4()) if name == "gemini" else None,
                       stall_timeout=600)
    before = time.time()
    attempt = run_attempt(req)
    assert attempt.classification is Classification.CAPACITY, attempt.reason
    assert attempt.limit is not None
    assert "then silent" not in attempt.reason, "opencode's quota words end it, not the stall"
    if name == "gemini":
        assert attempt.limit.resets_at is not None
        assert before + 3500 < attempt.limit.resets_at < time.time() + 3700


@pytest.mark.parametrize("name", ["opencode", "gemini"])
def test_an_unknown_session_is_replaced_by_a_fresh_one(name: str,
                                                       make_request: RequestFactory) -> None:
    session = str(uuid.uuid4()) if name == "gemini" else "ses_gone"
    attempt = run_attempt(make_request(name, session_id=session, resume=True))
    assert attempt.classification is Classification.OK, attempt.reason
    if name == "opencode":
        assert attempt.session_id != "ses_gone"
    else:
        assert attempt.session_id == session and "--session-id" in attempt.argv


def test_a_taken_gemini_session_is_resumed(make_request: RequestFactory) -> None:
    session = str(uuid.uuid4())
    assert run_attempt(make_request("gemini", session_id=session)).classification is (
        Classification.OK)
    again = run_attempt(make_request("gemini", session_id=session))
    assert again.classification is Classification.OK and "-r" in again.argv


@pytest.mark.parametrize("name", ["opencode", "gemini"])
def test_not_logged_in_is_auth(name: str, make_request: RequestFactory) -> None:
    attempt = run_attempt(make_request(name, prompt="Fix it [sim:auth]",
                                       session_id=str(uuid.uuid4())))
    assert attempt.classification is Classification.AUTH, attempt.reason
