"""Every behaviour the simulated CLIs fake is also shown once by a real CLI; this says where.

The simulators (lane_runner/providers/simulators) keep their place: they start in
milliseconds and run anywhere, so the daemon, board, journal and benchmark suites drive
them by the hundred. Each scenario they play is listed in ``SHOWN_BY`` with the test that
shows the same behaviour with the real, pinned CLIs (tests/contract: no model at all;
tests/realrun: against the scripted model server), or with why no real CLI can show it.
A new scenario fails ``test_every_simulated_behaviour_is_placed`` until it is placed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from lane_runner.providers.simulators.play import SCENARIOS

TESTS = Path(__file__).parents[1]
WORK = "realrun/test_work.py::"
ANSWERS = ("realrun/test_answers.py::"
           "test_the_answers_real_clis_hand_over_are_judged_as_the_readme_says")
FAILURES = ("realrun/test_failures.py::"
            "test_every_failure_ends_as_documented_and_the_documented_table_is_what_they_did")
SIMULATOR_ONLY = "simulator only: "

SHOWN_BY: dict[str, str] = {
    "success": WORK + "test_each_cli_runs_a_tool_that_changes_the_worktree_and_answers",
    "slow": WORK + "test_kill_9_between_two_tool_calls_then_the_same_session_resumes",
    "linger": WORK + "test_a_cli_that_answers_and_lingers_keeps_its_answer",
    "commit": WORK + "test_a_cli_that_commits_by_itself_is_respected_and_no_change_is_a_result",
    "nochange": WORK + "test_a_cli_that_commits_by_itself_is_respected_and_no_change_is_a_result",
    "incomplete": ANSWERS,
    "goal": ANSWERS,
    "blocked": ANSWERS,
    "unfinished": ANSWERS,
    "artifacts": ANSWERS,
    "nul": ANSWERS,
    "grandchildren": ANSWERS,
    "crash": ANSWERS,
    "capacity": FAILURES,
    "hang": FAILURES,
    "auth": ("realrun/test_failures.py::"
             "test_an_authentication_failure_marks_the_provider_in_its_health"),
    "session-missing": "contract/test_real_clis.py::test_claude_takes_every_argv_of_the_runner",
    "reconnect-forever": ("contract/test_real_clis.py::"
                          "test_codex_takes_every_argv_and_its_spent_reconnects_end_the_attempt"),
    "garbage": SIMULATOR_ONLY + "the real CLIs print only JSON lines on stdout (their warnings "
    "go to stderr: tests/providers/fixtures/real-cli); the supervisor's tolerance of other "
    "lines is for CLIs to come",
    "huge": SIMULATOR_ONLY + "the real CLIs cap what they print of a tool's output, so a "
    "many-MiB line comes only from a simulator (tests/providers/test_supervisor.py)",
    "long-summary": SIMULATOR_ONLY + "the runner bounds a summary of megabytes before its "
    "log, reasons and comments read it, the same whichever CLI carried it; a simulator "
    "hands one over in milliseconds (tests/daemon/test_long_texts.py)",
    "long-answer": SIMULATOR_ONLY + "the runner fits an answer of megabytes to its journal "
    "the same whichever CLI carried it; a simulator hands one over in milliseconds "
    "(tests/daemon/test_long_texts.py)",
    "silent-tool": WORK + "test_a_real_cli_running_a_silent_tool_past_the_stall_timeout_survives",
    "checkout": SIMULATOR_ONLY + "where the worker leaves HEAD is git's, not the CLI's: a "
    "simulator moves it as any tool would, and the runner's answer is the same whichever "
    "CLI ran the checkout (tests/daemon/test_delivery.py)",
    "feedback": ("realrun/test_verify.py::"
                 "test_codex_implements_claude_reviews_through_a_failing_check_and_changes_asked"),
    "prose": SIMULATOR_ONLY + "a reply that is not the schema gets a repair turn in the same "
    "session, the same whichever prompted CLI carried it (tests/providers, the repair "
    "tests); the real CLIs are asked for the schema and answer it",
    "escapes": SIMULATOR_ONLY + "the text log and journal show escape a summary's control "
    "characters, the same whichever CLI carried it (tests/operator/test_terminal_escapes.py)",
}


def test_every_simulated_behaviour_is_placed() -> None:
    assert set(SHOWN_BY) == set(SCENARIOS)


def test_every_named_real_cli_test_exists() -> None:
    for scenario, where in SHOWN_BY.items():
        if where.startswith(SIMULATOR_ONLY):
            continue
        path, _, name = where.partition("::")
        tree = ast.parse((TESTS / path).read_text())
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in names, f"{scenario}: no test {name} in tests/{path}"
