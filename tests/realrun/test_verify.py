"""The real CLIs through checks and review (docs/verification.md, issue 41): codex
implements, its check fails once and the output goes back into its resumed session,
claude reviews in a session of its own and asks for changes once, then approves; the
task is done exactly once with its evidence."""

from __future__ import annotations

import json

import orjson
import pytest

from .conftest import ModelServer, RealLane, answer, marker
from .test_work import assert_committed_once

pytestmark = pytest.mark.timeout(600)

CHECK = 'test -f fixed.txt || { echo "fixed.txt is missing"; exit 1; }'


def review(verdict: str, *findings: dict[str, object]) -> dict[str, object]:
    return {"verdict": verdict, "summary": f"{verdict}: scripted", "findings": list(findings)}


def test_codex_implements_claude_reviews_through_a_failing_check_and_changes_asked(
    real_lane: RealLane, model_server: ModelServer
) -> None:
    name = marker("verify")
    asked = {"file": "made.txt", "line": 1, "severity": "major",
             "text": "add reviewed.txt saying the change was reviewed"}
    model_server.script(
        name,
        codex=[
            {"shell": "echo made > made.txt"},
            {"attempts": [{"answer": answer("made made.txt", ["made.txt"])},
                          {"shell": "echo fixed > fixed.txt"}]},
            {"attempts": [{"answer": answer("made fixed.txt", ["fixed.txt"])},
                          {"shell": "echo reviewed > reviewed.txt"}]},
            {"answer": answer("made reviewed.txt", ["reviewed.txt"])},
        ],
        claude=[{"attempts": [{"answer": review("request_changes", asked)},
                              {"answer": review("approve")}]}],
    )
    real_lane.write_config(checks=[CHECK], review="auto")
    task = real_lane.add(name, assignee="cli-codex-low")
    assert real_lane.start("--until-idle").wait(timeout=400) == 0, real_lane.task_log(task.id)
    assert_committed_once(real_lane, task.id, "reviewed.txt")
    codex = [json.dumps(r["body"]) for r in model_server.requests(name, "codex")]
    assert any("fixed.txt is missing" in body for body in codex)  # the check's output, fed
    assert any("add reviewed.txt saying the change was reviewed" in body for body in codex)
    sessions = {r["session"] for r in model_server.requests(name, "codex")}
    assert len(sessions) == 1  # one codex session, resumed for both turns fed back
    assert len(model_server.requests(name, "claude")) >= 2
    found = orjson.loads(real_lane.cli("evidence", task.id, "--json").stdout)
    assert found["turns"]["check_turns"] == 1 and found["turns"]["review_rounds"] == 1
    assert found["verdict"]["verdict"] == "approve" and found["verdict"]["reviewer"] == "claude"
    assert [r["verdict"]["verdict"] for r in found["rounds"][1:]] == ["request_changes",
                                                                      "approve"]
    assert set(found["usage_by_role"]) == {"implement", "review"}
    assert real_lane.live_workers() == []
