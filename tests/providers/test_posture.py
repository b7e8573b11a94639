"""The agents' trust posture (docs/security.md): codex's own sandbox as a setting, and
the runner's deny list reaching every CLI that has a way to deny a command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.cli import doctor_clis
from lane_runner.errors import UsageError
from lane_runner.home import Home
from lane_runner.providers import ADAPTERS, Classification, claude, codex, denied, run_attempt
from lane_runner.providers.simulators import codex as codex_sim
from lane_runner.router import Route
from lane_runner.run import plan
from lane_runner.run.slices import Supervisor

from .conftest import RequestFactory, claude_argv, codex_argv

CLAUDE = claude.ADAPTER

THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"
BYPASS = "--dangerously-bypass-approvals-and-sandbox"


def _sandbox_options(argv: list[str]) -> list[str]:
    """The ``-c`` values of ``argv`` that set codex's sandbox or approval policy."""
    values = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-c"]
    return [v for v in values if v.startswith(("sandbox_mode=", "approval_policy="))]


@pytest.mark.parametrize("thread", [None, THREAD])
@pytest.mark.parametrize("mode", [None, "bypass"])
def test_codex_bypasses_its_sandbox_and_approvals_by_default(
    make_request: RequestFactory, mode: str | None, thread: str | None
) -> None:
    """Today's posture, unchanged unless codex_sandbox says otherwise."""
    req = make_request("codex", sandbox=mode)
    argv = codex_argv(req, thread)
    assert argv[1] == BYPASS and argv.index("exec") == 3
    assert _sandbox_options(argv) == []


@pytest.mark.parametrize("thread", [None, THREAD])
@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_codex_sandbox_mode_replaces_the_bypass_in_both_forms(
    make_request: RequestFactory, mode: str, thread: str | None
) -> None:
    """``-c`` overrides, which ``exec resume`` takes too (it has no ``--sandbox``), after
    the operator's own so they win, and approvals never asked: nobody answers."""
    req = make_request("codex", sandbox=mode, config_overrides={"sandbox_workspace_write.x": 1})
    argv = codex_argv(req, thread)
    assert BYPASS not in argv and "--skip-git-repo-check" in argv
    assert _sandbox_options(argv) == [f'sandbox_mode="{mode}"', 'approval_policy="never"']
    assert argv.index(f'sandbox_mode="{mode}"') > argv.index("sandbox_workspace_write.x=1")
    parsed = codex_sim.parse(argv[1:])  # the simulator parses as the real CLI (tests/contract)
    assert parsed.resume is (thread is not None)


def test_codex_sandbox_is_a_setting_refused_with_words(tmp_path: Path) -> None:
    assert config.load(tmp_path, {}).codex_sandbox == "bypass"
    chosen = config.load(tmp_path, {"LANE_RUNNER_CODEX_SANDBOX": "workspace-write"})
    assert config.cli_sandbox(chosen, "codex") == "workspace-write"
    assert config.cli_sandbox(chosen, "claude") is None  # claude has none the runner picks
    with pytest.raises(UsageError, match=(
        r"bad value for codex_sandbox in LANE_RUNNER_CODEX_SANDBOX: 'sandboxed' \(expected one "
        r"of bypass, workspace-write, read-only\)")):
        config.load(tmp_path, {"LANE_RUNNER_CODEX_SANDBOX": "sandboxed"})


@pytest.mark.parametrize("key", ["sandbox_mode", "approval_policy"])
def test_codex_config_cannot_set_what_codex_sandbox_chooses(tmp_path: Path, key: str) -> None:
    with pytest.raises(UsageError, match=f"'{key}' is chosen by codex_sandbox"):
        config.load(tmp_path, {"LANE_RUNNER_CODEX_CONFIG": f'{key} = "danger-full-access"'})


def test_the_configured_sandbox_reaches_the_request(tmp_path: Path) -> None:
    cfg = config.load(tmp_path, {"LANE_RUNNER_CODEX_SANDBOX": "read-only"})
    route = Route("codex", "gpt-5.5", "low", "codex-low", "static", "test", 0)
    planned = plan.plan_attempt(route, cfg, Home(tmp_path), {"codex": tmp_path / "codex"}, {}, {})
    req = plan.request(
        planned, Supervisor.of(cfg), executable=tmp_path / "codex", prompt="p", workspace=tmp_path,
        schema_path=tmp_path / "s.json", result_file=tmp_path / "r.json",
        retry_result_file=None, log_path=tmp_path / "log", env={}, deadline=0.0,
    )
    assert req.sandbox == "read-only"
    assert 'sandbox_mode="read-only"' in codex_argv(req, None)


def test_every_cli_says_how_it_denies_commands() -> None:
    """Each CLI has a way; one without must say so in docs/security.md."""
    assert {name: bool(cli.denies_by) for name, cli in ADAPTERS.items()} == {
        "codex": True, "claude": True, "opencode": True, "gemini": True}


def test_claude_gets_every_denied_command_twice(make_request: RequestFactory) -> None:
    req = make_request("claude")
    argv = claude_argv(req, str(req.session_id), False, "{}")
    flagged = argv[argv.index("--disallowedTools") + 1 : -2]
    settings = json.loads(CLAUDE.settings_file())["permissions"]["deny"]
    for command in denied.DENIED_COMMANDS:
        rule = f"Bash({' '.join(command)} *)"
        assert rule in flagged and rule in settings


def _forbidden_prefixes(rules: str) -> set[tuple[str, ...]]:
    """The patterns of ``rules``' ``forbidden`` prefix rules (the file is Starlark; its
    lists are written as JSON, which is what this reads back)."""
    found: set[tuple[str, ...]] = set()
    for block in rules.split("prefix_rule(")[1:]:
        pattern = block.split("pattern = ", 1)[1].split("\n", 1)[0].rstrip(",")
        if 'decision = "forbidden"' in block:
            found.add(tuple(json.loads(pattern)))
    return found


def test_codex_rules_forbid_every_denied_command() -> None:
    assert _forbidden_prefixes(codex.rules_text()) == set(denied.DENIED_COMMANDS)


def test_codex_gets_its_rules_file_before_every_start(make_request: RequestFactory) -> None:
    """Written in the worker's codex home before the start, and written again over a
    worker's edit; the simulated CLIs (``simulate``) get none."""
    req = make_request("codex")
    rules = Path(req.env["CODEX_HOME"]) / "rules" / codex.RULES_NAME
    assert run_attempt(req).classification is Classification.OK
    assert rules.read_text() == codex.rules_text()
    rules.write_text("# emptied by the worker\n")
    run_attempt(make_request("codex"))
    assert rules.read_text() == codex.rules_text()
    rules.unlink()
    run_attempt(make_request("codex", simulated=True))
    assert not rules.exists()


def test_codex_that_cannot_get_its_rules_does_not_start(
    make_request: RequestFactory, tmp_path: Path
) -> None:
    """A codex home the rules cannot be written to: the attempt is refused as the
    runner's misconfiguration (the runner falls back or waits), naming the path."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    req = make_request("codex")
    req.env["CODEX_HOME"] = str(blocker)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.MISCONFIGURED
    assert attempt.reason.startswith("codex cannot be started with the runner's deny list: ")
    assert f"{blocker}/rules/{codex.RULES_NAME}" in attempt.reason
    assert attempt.argv == []  # nothing was started


def test_the_deny_list_is_spelled_as_people_type_it() -> None:
    assert all(shlex.split(denied.spelled(c)) == list(c) for c in denied.DENIED_COMMANDS)


def test_doctor_probes_codex_in_the_configured_sandbox_mode(tmp_path: Path) -> None:
    """``doctor`` has the real CLI parse the argv the runner would run: the configured
    mode's, not the default's."""
    argv = doctor_clis.runner_argv("codex", tmp_path / "codex", tmp_path, "read-only")
    assert 'sandbox_mode="read-only"' in argv and BYPASS not in argv and argv[-1] == "--help"
    assert BYPASS in doctor_clis.runner_argv("codex", tmp_path / "codex", tmp_path)
