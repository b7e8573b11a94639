"""Goal judges: the structural check (pure) and the router judge over a real server."""

from __future__ import annotations

import pytest

from lane_runner.errors import UsageError
from lane_runner.router import RouterJudge, StructuralJudge, make_judge, make_router
from lane_runner.router.judge import structural_verdict


def result(**changes):
    answer = {
        "status": "completed",
        "summary": "Parser accepts empty files; added a regression test.",
        "changed_files": ["parser.py"],
        "tests_run": ["pytest"],
        "artifacts": [],
        "findings": [],
        "blockers": [],
    }
    return {**answer, **changes}


@pytest.mark.parametrize(
    ("changes", "accepted", "reason_part"),
    [
        ({}, True, "no unfinished-work markers"),
        ({"summary": "Built the todo list app and its tests."}, True, "completed"),
        ({"summary": "Removed the last TODOs from the parser."}, True, "completed"),
        ({"summary": "The remaining workflow step now passes."}, True, "completed"),
        ({"summary": "Findings: TBDs table renamed."}, True, "completed"),
        ({"summary": "Handles incomplete and unfinished UTF-8 input."}, True, "completed"),
        ({"status": "incomplete"}, False, "status is 'incomplete'"),
        ({"status": "blocked", "blockers": ["no access"]}, False, "status is 'blocked'"),
        ({"blockers": ["needs the API key"]}, False, "1 blocker(s) reported: needs the API key"),
        ({"summary": "   "}, False, "summary is empty"),
        ({"summary": None}, False, "summary is empty"),
        ({"summary": "Done. TODO: wire the CLI."}, False, "'TODO'"),
        ({"summary": "Works, FIXME later"}, False, "'FIXME'"),
        ({"summary": "Export is not yet implemented."}, False, "'not yet implemented'"),
        ({"summary": "Remaining work: docs."}, False, "'Remaining work'"),
        ({"summary": "Follow-up needed for Windows."}, False, "'Follow-up needed'"),
        ({"summary": "Parser done; follow up needed on lexer."}, False, "'follow up needed'"),
        ({"summary": "The lexer still needs tests."}, False, "'still needs'"),
        ({"summary": "Work in progress on the lexer."}, False, "'Work in progress'"),
    ],
)
def test_structural_judge(changes, accepted, reason_part):
    verdict = structural_verdict(result(**changes))
    assert verdict.accepted is accepted
    assert reason_part in verdict.reason


def test_router_judge_asks_only_about_structurally_complete_answers(server, router):
    judge = RouterJudge(router)
    verdict = judge.judge("ctx", result(status="incomplete"))
    assert not verdict.accepted and server.requests == []
    server.say("reject: the regression test does not cover CRLF files")
    verdict = judge.judge("ctx", result())
    assert (verdict.accepted, verdict.reason) == (
        False,
        "the regression test does not cover CRLF files",
    )
    content = server.requests[0]["json"]["messages"][0]["content"]
    assert content.startswith("ctx") and '"changed_files"' in content


def test_make_judge_structural_by_default(cfg):
    assert isinstance(make_judge(cfg, make_router(cfg)), StructuralJudge)


def test_make_judge_router_needs_a_router_url(cfg, server):
    with pytest.raises(UsageError, match="needs router_url"):
        make_judge(cfg.replace(judge="router"), make_router(cfg))
    with_url = cfg.replace(judge="router", router_url=server.url)
    router = make_router(with_url)
    try:
        assert isinstance(make_judge(with_url, router), RouterJudge)
    finally:
        router.close()


def test_make_judge_refuses_an_unknown_judge(cfg):
    with pytest.raises(UsageError, match="expected empty or 'router'"):
        make_judge(cfg.replace(judge="llm"), make_router(cfg))
