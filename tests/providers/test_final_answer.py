"""A result is a result: a CLI that stays alive after its final answer keeps the answer.

Claude Code may linger after its ``result`` event (a ``SessionEnd`` hook still
running), codex after ``turn.completed``. The attempt is over once that word is
out: after ``closing_grace`` the supervisor ends the tree and the answer is judged
as usual, never "stalled" (issue 26, finding 1).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lane_runner.providers import Classification, run_attempt
from lane_runner.providers.supervisor import Clocks, Limits, lingering, overdue

from .conftest import RequestFactory


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_a_cli_lingering_after_its_answer_is_ended_and_the_answer_kept(
    make_request: RequestFactory, provider: str
) -> None:
    """The lingering CLI is ended after the closing grace (default, 5 s) with its answer
    intact; before, its silence ran into the stall clock (10 s: a loaded machine may take
    seconds to start the simulator) and the answer was dropped as "stalled"."""
    req = make_request(provider, prompt="[sim:linger] fix it", stall_timeout=10.0)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason
    assert attempt.structured is not None and attempt.structured["status"] == "completed"
    assert "after its final answer" in req.log_path.read_text()


def test_a_shutdown_after_the_answer_keeps_the_answer(make_request: RequestFactory) -> None:
    """The runner stops (SIGTERM, task stop) while an answered CLI lingers: no grace is
    waited out, and the attempt is the answer, not "cancelled"."""
    cancel = threading.Event()
    req = make_request("claude", prompt="[sim:linger] fix it", cancel=cancel, closing_grace=600)

    over = threading.Event()

    def cancel_once_answered() -> None:
        while not over.is_set() and b"final answer received" not in _read(req.log_path):
            time.sleep(0.01)
        cancel.set()

    watcher = threading.Thread(target=cancel_once_answered, daemon=True)
    watcher.start()
    try:
        attempt = run_attempt(req)
    finally:
        over.set()
        watcher.join()
    assert attempt.classification is Classification.OK, attempt.reason
    assert "its answer kept: the runner is stopping" in req.log_path.read_text()


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def test_after_the_answer_only_the_closing_grace_counts() -> None:
    limits = Limits(deadline=10.0, stall_timeout=1.0, closing_grace=3.0)
    clocks = Clocks(started=0.0, last_event=0.0, last_heartbeat=0.0)
    assert overdue(clocks, limits, 2.0) is not None  # stalled, before any answer
    clocks.answered = 0.5
    assert overdue(clocks, limits, 20.0) is None  # neither the stall nor the runtime
    assert lingering(clocks, limits, 3.4) is None
    assert lingering(clocks, limits, 3.5) == "still running 3s after its final answer"
