"""A pull request named in a task holds its second run for 24 h (issue 42), as Hermes's
own dispatcher's guard does: decided in ``board/pullrequests.py``, read on a real
Hermes board beside ``hermes kanban``."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing

from lane_runner.board.pullrequests import WINDOW_SECONDS, Mention, hold
from tests.hermes.conftest import HermesLane

PR = "https://github.com/acme/widgets/pull/7"


def test_the_newest_pull_request_within_a_day_holds() -> None:
    now = 1_000_000.0
    old = Mention(f"see {PR}", now - WINDOW_SECONDS, "a comment")
    assert hold([old], now) is None  # a day old: no longer held
    fresh = Mention(f"opened {PR}.", now - 60, "a comment")
    newer = Mention('{"pr_url": "https://github.com/acme/widgets/pull/8"}', now - 5, "run 3")
    found = hold([old, fresh, newer], now)
    assert found is not None and found.url.endswith("/pull/8") and found.where == "run 3"
    assert found.until == now - 5 + WINDOW_SECONDS
    assert hold([Mention("https://github.com/acme/widgets/issues/7", now, "c")], now) is None


def runs_of(hermes_lane: HermesLane, task_id: str) -> int:
    with closing(hermes_lane.hermes.db()) as db:
        counted = db.execute("SELECT COUNT(*) FROM task_runs WHERE task_id = ?", (task_id,))
        return int(counted.fetchone()[0])


def _comment_age(hermes_lane: HermesLane, task_id: str, seconds: float) -> None:
    """Hermes's own clock says when a comment was made: age it as a day passing would."""
    path = hermes_lane.hermes.path / "kanban.db"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "UPDATE task_comments SET created_at = created_at - ? WHERE task_id = ?",
            (seconds, task_id),
        )


def test_a_fresh_pull_request_holds_a_second_run_with_the_reason_shown(
    hermes_lane: HermesLane,
) -> None:
    hermes = hermes_lane.hermes
    ids = [
        hermes.create(f"t{n}", "--assignee", "cli-codex-low", "--body", "[sim:blocked]")
        for n in range(2)
    ]
    first = hermes.create("never run", "--assignee", "cli-codex-low", "--body", "do it")
    hermes.hermes("comment", first, f"context: {PR}")  # a first run is not a second one
    assert hermes_lane.start("--until-idle").wait(timeout=300) in (0, 4)
    assert hermes.statuses(ids) == {ids[0]: "blocked", ids[1]: "blocked"}
    for task_id in ids:
        hermes.hermes("comment", task_id, f"the worker opened {PR}")
        hermes.hermes("unblock", task_id, "--reason", "try again")
    _comment_age(hermes_lane, ids[1], WINDOW_SECONDS + 60)  # named over a day ago
    for _ in range(2):  # held, and the reason said once however many sweeps
        assert hermes_lane.start("--until-idle").wait(timeout=300) in (0, 4)
    statuses = hermes.statuses([*ids, first])
    assert statuses[ids[0]] == "ready" and statuses[first] == "done"
    shown = json.loads(hermes.hermes("show", ids[0], "--json"))
    said = [c["body"] for c in shown["comments"] if c["body"].startswith("held: pull request")]
    assert len(said) == 1 and PR in said[0]
    assert runs_of(hermes_lane, ids[1]) == 2  # the day-old one ran again
    assert runs_of(hermes_lane, ids[0]) == 1  # no second run beside the pull request
    _comment_age(hermes_lane, ids[0], time.time())  # a day later
    assert hermes_lane.start("--until-idle").wait(timeout=300) in (0, 4)
    assert runs_of(hermes_lane, ids[0]) == 2
