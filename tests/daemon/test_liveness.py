"""Two clocks for liveness (issue 32), with a real daemon and the simulated CLIs: a tool
that works silently past ``stall_timeout`` survives; a reconnect loop does not."""

from __future__ import annotations

import json
import signal

import pytest

from lane_runner.board.model import Status
from lane_runner.providers.registry import adapter
from lane_runner.providers.supervisor import Clocks, Limits, busy, overdue
from tests.harness import Lane

#: Short enough that a tool of a few seconds outlasts it many times over.
STALL = 1.5


def attempts(lane: Lane, task_id: str) -> list[tuple[str, str]]:
    state = lane.lane_state(task_id)
    return [(a["provider"], a["classification"]) for a in state["attempts"]]  # type: ignore[index,union-attr]


def run_until_idle(lane: Lane) -> None:
    assert lane.start("--until-idle").wait(timeout=180) == 0


def test_a_tool_burning_cpu_silently_past_the_stall_timeout_survives(lane: Lane) -> None:
    """Only the CPU clock can save it: the tool clock's limit is the stall limit here."""
    lane.write_config(stall_timeout=STALL, tool_stall_timeout=STALL, busy_cpu_percent=10.0)
    task = lane.add("build", body="[sim:silent-tool:8:burn]", assignee="cli-codex-low")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    assert attempts(lane, task.id) == [("codex", "ok")]
    assert "its processes are using CPU: still working" in lane.home.log_file(
        "work", task.id
    ).read_text()


def test_a_silent_tool_call_in_flight_runs_on_the_tool_clock(lane: Lane) -> None:
    """A tool that waits (no CPU) for several stall timeouts, until the test lets it end:
    alive while its call is in flight, and status shows the tool clock running."""
    gate = lane.root / "tool-gate"
    gate.touch()
    lane.extra_env["LANE_RUNNER_SIM_TOOL_GATE"] = str(gate)
    lane.write_config(stall_timeout=STALL, tool_stall_timeout=3600.0, busy_cpu_percent=0.0)
    tasks = {
        provider: lane.add(f"wait {provider}", body="[sim:silent-tool:3:sleep]",
                           assignee=f"cli-{provider}-low")
        for provider in ("codex", "claude")
    }
    daemon = lane.start()

    def clocks() -> list[object]:
        state = json.loads(lane.cli("status", "--json").stdout)
        return [run.get("clock") for run in state["active"]]

    lane.wait(lambda: clocks() == ["tool", "tool"], what="status to show the tool clock")
    assert lane.cli("status").stdout.count("tool 1h00m") == 2
    gate.unlink()
    lane.wait(lambda: lane.all_done(), timeout=120, what="both tasks")
    for provider, task in tasks.items():
        assert attempts(lane, task.id) == [(provider, "ok")]
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_a_quiet_tool_that_uses_no_cpu_still_stalls_without_the_tool_clock(lane: Lane) -> None:
    """The control: the same waiting tool with the tool clock at the stall limit is ended as
    a stall (the CPU clock does not call a sleeping tree alive)."""
    lane.write_config(stall_timeout=STALL, tool_stall_timeout=STALL, busy_cpu_percent=10.0)
    task = lane.add("waits", body="[sim@codex:silent-tool:30:sleep]", assignee="cli-codex-low")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    assert attempts(lane, task.id) == [("codex", "stalled"), ("claude", "ok")]


def test_a_reconnect_loop_is_still_caught_at_the_stall_timeout(lane: Lane) -> None:
    """claude retrying its API for ever: events that are not progress, hardly any CPU, no
    tool call. The generous tool clock and the CPU clock do not keep it alive."""
    lane.write_config(stall_timeout=STALL, tool_stall_timeout=3600.0, busy_cpu_percent=10.0)
    task = lane.add("offline", body="[sim@claude:reconnect-forever]", assignee="cli-claude-low")
    run_until_idle(lane)
    assert lane.board.get_task(task.id).status is Status.DONE
    assert attempts(lane, task.id) == [("claude", "stalled"), ("opencode", "ok")]  # the next CLI
    reason = lane.lane_state(task.id)["attempts"][0]["reason"]  # type: ignore[index]
    assert "and no tool call in flight" in reason


# -- the pure parts ------------------------------------------------------------------


def test_which_clock_ends_a_quiet_attempt() -> None:
    limits = Limits(deadline=10_000.0, stall_timeout=10.0, tool_stall_timeout=100.0, busy_cpu=0.1)
    clocks = Clocks(started=0.0, last_event=0.0, last_heartbeat=0.0)
    assert overdue(clocks, limits, 50.0, in_flight=True) is None
    stalled = overdue(clocks, limits, 100.0, in_flight=True)
    assert stalled is not None and "with a tool call in flight" in stalled[1]
    assert overdue(clocks, limits, 10.0) is not None
    clocks.last_busy = 95.0  # the tree was working a moment ago
    assert overdue(clocks, limits, 100.0) is None and overdue(clocks, limits, 105.0) is not None


@pytest.mark.parametrize(
    ("before", "after", "elapsed", "threshold", "working"),
    [
        (1.0, 4.0, 3.0, 0.1, True),  # one CPU for three seconds
        (1.0, 1.2, 3.0, 0.1, False),  # a reconnect loop's crumbs
        (None, 4.0, 3.0, 0.1, False),  # no earlier reading
        (1.0, 4.0, 3.0, 0.0, False),  # off
    ],
)
def test_cpu_time_growing_faster_than_the_threshold_is_work(
    before: float | None, after: float, elapsed: float, threshold: float, working: bool
) -> None:
    assert busy(before, after, elapsed, threshold) is working


def test_each_adapter_knows_when_a_tool_call_is_in_flight() -> None:
    codex, claude = adapter("codex"), adapter("claude")
    tools: set[str] = set()
    item = {"id": "item_3", "type": "command_execution", "status": "in_progress"}
    codex.track_tools(tools, {"type": "item.started", "item": item})
    codex.track_tools(tools, {"type": "item.started", "item": {"id": "r", "type": "reasoning"}})
    assert tools == {"item_3"}
    codex.track_tools(tools, {"type": "item.completed", "item": {**item, "status": "completed"}})
    assert tools == set()
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
    claude.track_tools(tools, {"type": "assistant", "message": {"content": [use]}})
    assert tools == {"toolu_1"}
    answer = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    claude.track_tools(tools, {"type": "user", "message": {"content": [answer]}})
    assert tools == set()
    claude.track_tools(tools, {"type": "assistant", "message": {"content": [use]}})
    claude.track_tools(tools, {"type": "result", "subtype": "success"})
    assert tools == set()  # the final answer: nothing is in flight any more
