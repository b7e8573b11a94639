"""The console in process over real boards (SQLite and PostgreSQL): what each page and
the API show, that outside text reaches a page redacted and inert, and who may act."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from lane_runner.board.base import ReviewRuns
from lane_runner.board.model import Approval, BlockKind, Outcome, Status, TaskSettings
from lane_runner.providers.usage import UsageReport, tokens
from lane_runner.usage import share
from lane_runner.usage.ledger import Attempt, Ledger
from lane_runner.usage.record import Role
from tests.web.conftest import BOARD, TOKEN, Site

PAGES = ("/", "/runs", "/usage", "/health", "/login", "/api/v1/state", "/api/v1/boards",
         f"/api/v1/boards/{BOARD}", "/api/v1/usage")
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SECRET = "ghp_" + "a1b2c3d4e5" * 4


def _blocked(site: Site) -> str:
    """A task blocked needing input (what ``retry`` applies to)."""
    task_id = site.add("needs a person")
    claim = site.board.claim("node-a", 30.0, "cli-auto")
    assert claim is not None and claim.task.id == task_id
    site.board.block(claim.run.id, "which database?", BlockKind.NEEDS_INPUT)
    return task_id


def test_every_page_reads_on_loopback_without_a_token(site: Site) -> None:
    task_id = site.add("the first task", body="what to do")
    with site.client(token=None) as client:
        for path in (*PAGES, f"/boards/{BOARD}/tasks/{task_id}",
                     f"/api/v1/boards/{BOARD}/tasks/{task_id}"):
            response = client.get(path)
            assert response.status_code == 200, (path, response.text[:500])
            assert response.headers["content-security-policy"].startswith("default-src 'self'")
        board = client.get("/").text
    assert "the first task" in board
    ready = re.search(r'data-status="ready">\s*<h3>ready <span class="count">(\d+)', board)
    assert ready is not None and ready.group(1) == "1"


def test_the_board_filters_by_lane_and_workspace(site: Site) -> None:
    site.add("for codex", assignee="cli-codex-high")
    site.add("for claude", assignee="cli-claude-high")
    with site.client() as client:
        shown = client.get("/", params={"lane": "cli-codex-high"}).text
        elsewhere = client.get("/", params={"workspace": "/nowhere"}).text
    assert "for codex" in shown and "for claude" not in shown
    assert "for codex" not in elsewhere


def test_outside_text_is_redacted_and_inert_on_pages_and_in_the_api(site: Site) -> None:
    """A log line is the CLI's, never through the board's gate: the console's own gate
    must hide its secret, and its terminal escape and markup must arrive as text."""
    task_id = site.add("title <b>bold</b> \x1b]0;owned\x07")
    log = site.home.log_file(BOARD, task_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"[stderr] pushing with {SECRET} \x1b[2J<script>alert(1)</script>\n")
    with site.client() as client:
        page = client.get(f"/boards/{BOARD}/tasks/{task_id}").text
        document = client.get(f"/api/v1/boards/{BOARD}/tasks/{task_id}").content
    assert SECRET not in page and "ghp_***" in page
    assert "\x1b" not in page and "\\x1b[2J" in page and "\\x1b]0;owned\\x07" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)" in page
    assert "<b>bold</b>" not in page
    assert SECRET.encode() not in document


def test_a_control_needs_the_token(site: Site) -> None:
    task_id = _blocked(site)
    path = f"/api/v1/boards/{BOARD}/tasks/{task_id}/retry"
    with site.client() as client:
        refused = client.post(path, json={"comment": "try again"})
        wrong = client.post(path, headers={"Authorization": "Bearer not-the-token-at-all"})
        assert site.board.get_task(task_id).status is Status.BLOCKED
        done = client.post(path, json={"comment": "use sqlite"}, headers=BEARER)
    assert refused.status_code == 401 and "sign in" in refused.json()["error"]
    assert wrong.status_code == 401
    assert done.status_code == 200, done.text
    assert site.board.get_task(task_id).status is Status.READY
    assert site.board.comments(task_id)[-1].body == "use sqlite"


def test_a_signed_in_form_needs_its_csrf_field(site: Site) -> None:
    task_id = _blocked(site)
    action = f"/boards/{BOARD}/tasks/{task_id}/retry"
    with site.client() as client:
        bad = client.post("/login", data={"token": "wrong-token-wrong-token", "next": "/"})
        signed = client.post("/login", data={"token": TOKEN, "next": action})
        forged = client.post(action, data={"comment": "from another site"})
        assert site.board.get_task(task_id).status is Status.BLOCKED
        page = client.get(f"/boards/{BOARD}/tasks/{task_id}").text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert csrf is not None
        done = client.post(action, data={"comment": "go", "csrf": csrf.group(1)})
    assert bad.status_code == 401 and "not the console" in bad.text
    assert signed.status_code == 303 and signed.headers["location"] == action
    assert forged.status_code == 403 and "CSRF" in forged.text
    assert done.status_code == 303 and "retried" in done.headers["location"]
    assert site.board.get_task(task_id).status is Status.READY


def test_without_a_token_the_controls_are_off(site: Site) -> None:
    task_id = _blocked(site)
    with site.client(token=None) as client:
        answer = client.post(f"/api/v1/boards/{BOARD}/tasks/{task_id}/retry", headers=BEARER)
    assert answer.status_code == 401 and "LANE_RUNNER_WEB_TOKEN" in answer.json()["error"]
    assert site.board.get_task(task_id).status is Status.BLOCKED


def test_beyond_loopback_reading_needs_the_token_too(site: Site) -> None:
    with site.client(loopback_only=False) as client:
        page = client.get("/runs")
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/runs"
        assert client.get("/api/v1/state").status_code == 401
        assert client.get("/api/v1/state", headers=BEARER).status_code == 200
        assert client.get("/events").status_code == 401  # last: a stream let through stays open


def test_pause_and_resume_a_board_and_the_runner(site: Site) -> None:
    with site.client() as client:
        paused = client.post(f"/api/v1/boards/{BOARD}/pause", json={"reason": "upgrade"},
                             headers=BEARER)
        assert site.board.paused() is not None and site.board.paused().reason == "upgrade"
        assert site.board.claim("node-a", 30.0, "cli-auto") is None
        client.post(f"/api/v1/boards/{BOARD}/resume", headers=BEARER)
        runner = client.post("/api/v1/pause", json={"reason": "disk swap"}, headers=BEARER)
        health = client.get("/health").text
        client.post("/api/v1/resume", headers=BEARER)
    assert paused.status_code == 200 and runner.status_code == 200
    assert site.board.paused() is None
    assert "runner paused" in health and "disk swap" in health
    assert not site.home.pause_file.exists()


def test_a_stop_asks_the_running_runs_runner(site: Site) -> None:
    task_id = site.add("long work")
    claim = site.board.claim("node-a", 30.0, "cli-auto")
    assert claim is not None
    with site.client() as client:
        answer = client.post(f"/api/v1/boards/{BOARD}/tasks/{task_id}/stop",
                             json={"reason": "wrong task", "requeue": "true"}, headers=BEARER)
        run = client.get(f"/api/v1/boards/{BOARD}/runs/{claim.run.id}").json()
    assert answer.status_code == 200, answer.text
    stop = site.board.stop_request(claim.run.id)
    assert stop is not None and stop.requeue and stop.reason == "wrong task"
    assert run["id"] == claim.run.id and run["stop"]["reason"] == "wrong task"


def test_a_control_that_does_not_apply_is_refused_and_changes_nothing(site: Site) -> None:
    task_id = site.add("ready already")
    with site.client() as client:
        answer = client.post(f"/api/v1/boards/{BOARD}/tasks/{task_id}/retry", headers=BEARER)
        unknown = client.post(f"/api/v1/boards/{BOARD}/tasks/{task_id}/launch", headers=BEARER)
    assert answer.status_code == 409 and "not blocked" in answer.json()["error"]
    assert unknown.status_code == 404 and "retry" in unknown.json()["error"]
    assert site.board.get_task(task_id).status is Status.READY


@pytest.mark.parametrize("target", ["https://elsewhere.example/", "//elsewhere.example/x", "x"])
def test_the_login_sends_back_to_this_console_only(site: Site, target: str) -> None:
    with site.client() as client:
        answer = client.post("/login", data={"token": TOKEN, "next": target})
    assert answer.status_code == 303 and answer.headers["location"] == "/"


def test_the_task_document_has_what_task_show_has(site: Site) -> None:
    task_id = site.add("documented")
    with site.client() as client:
        document = orjson.loads(client.get(f"/api/v1/boards/{BOARD}/tasks/{task_id}").content)
    assert document["id"] == task_id and document["status"] == "ready"
    assert [event["kind"] for event in document["events"]] == ["created"]
    assert document["evidence"] is None and document["controls"] == []
    assert document["usage"]["total_tokens"] == 0


def test_a_task_awaiting_approval_is_approved_or_denied_from_the_console(site: Site) -> None:
    """The controls a task waiting for a person gets are ``task approve`` and ``task
    deny``: offered only while it waits, each needing the token, each recorded on the
    board with who and why (the page's words, the API's records)."""
    waiting = site.add("drop the table", settings=TaskSettings(approval=Approval.BEFORE_RUN))
    refused = site.add("drop the other table", settings=TaskSettings(approval=Approval.BEFORE_RUN))
    plain = site.add("nothing to approve")
    base = f"/api/v1/boards/{BOARD}/tasks"
    with site.client() as client:
        offered = client.get(f"{base}/{waiting}").json()["controls"]
        not_offered = client.get(f"{base}/{plain}").json()["controls"]
        anonymous = client.post(f"{base}/{waiting}/approve", json={"note": "ok"})
        approved = client.post(f"{base}/{waiting}/approve", json={"note": "plan looks right"},
                               headers=BEARER)
        reasonless = client.post(f"{base}/{refused}/deny", json={}, headers=BEARER)
        denied = client.post(f"{base}/{refused}/deny", json={"reason": "not this quarter"},
                             headers=BEARER)
        after = client.get(f"{base}/{waiting}").json()["controls"]
    assert {"approve", "deny"} <= set(offered) and not {"approve", "deny"} & set(not_offered)
    assert anonymous.status_code == 401
    assert approved.status_code == 200, approved.text
    assert site.board.get_task(waiting).approved and "approve" not in after
    assert reasonless.status_code == 409 and "say why" in reasonless.json()["error"]
    assert denied.status_code == 200, denied.text
    task = site.board.get_task(refused)
    assert task.status is Status.BLOCKED and task.block_kind is BlockKind.DENIED


def test_the_task_page_shows_its_cost_by_role_from_both_copies_of_the_ledger(
    site: Site, tmp_path: Path
) -> None:
    """An implementer's spend in this home, a reviewer's on the board from another
    runner: the page's cost by role and the API's ``usage.by_role`` hold both. Mutations:
    the role table left out of ``task.html``; ``by_role`` not in ``task_usage``; the
    board's copy not read (the reviewer's row missing)."""
    task_id = site.add("reviewed")
    figure = UsageReport("cumulative", "th", {"gpt-5": tokens(input=1200).tokens}, {})
    Ledger(site.home.usage).record(Attempt(BOARD, task_id, 1, 1, "codex"), figure, {}, 1.0)
    other = Ledger(tmp_path / "other-home")
    review = UsageReport("cumulative", "s", {"sonnet": tokens(input=345).tokens},
                         {"sonnet": 0.25})
    other.record(Attempt(BOARD, task_id, 1, 2, "claude", Role.REVIEW), review, {}, 2.0)
    assert share.send(site.board, other) == 1
    with site.client() as client:
        page = client.get(f"/boards/{BOARD}/tasks/{task_id}").text
        document = orjson.loads(client.get(f"/api/v1/boards/{BOARD}/tasks/{task_id}").content)
    assert "<tr><td>review</td><td>345</td><td>0.2500</td></tr>" in page
    assert "<tr><td>implement</td><td>1200</td><td>0.0000 (+ unknown)</td></tr>" in page
    by_role = document["usage"]["by_role"]
    assert (by_role["implement"]["total_tokens"], by_role["review"]["cost_usd"]) == (1200, 0.25)


def test_the_task_page_and_the_api_show_each_runs_role(site: Site) -> None:
    """A reviewer's run of its own (issue 41) shows as ``review of N`` beside the
    implementer's run, on SQLite and PostgreSQL. Mutation: the template's role cell left
    out (the page shows no role)."""
    task_id = site.add("reviewed")
    board = site.board
    claim = board.claim("node-a", 60.0, "cli-auto")
    assert claim is not None and isinstance(board, ReviewRuns)
    review = board.start_review_run(claim.run.id, "node-a", 60.0)
    assert review is not None
    board.end_review_run(review.id, Outcome.REVIEWED, "approve: fine")
    with site.client() as client:
        page = client.get(f"/boards/{BOARD}/tasks/{task_id}").text
        document = client.get(f"/api/v1/boards/{BOARD}/tasks/{task_id}").json()
        one = client.get(f"/api/v1/boards/{BOARD}/runs/{review.id}").json()
    assert f'<td class="role">review of {claim.run.id}</td>' in page
    assert '<td class="role">implement</td>' in page
    assert [(r["role"], r["for_run"]) for r in document["runs"]] == [
        ("implement", None), ("review", claim.run.id)]
    assert (one["role"], one["outcome"]) == ("review", "reviewed")
