"""The console the daemon serves (``web_listen``): what ``/api/v1/state`` says of a run in
flight, and a start refused when the console cannot listen."""

from __future__ import annotations

import json
import signal
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from lane_runner.board.model import Status
from tests.harness import Lane
from tests.web.browser import free_port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_the_state_says_each_runs_turn_session_and_heartbeat(lane: Lane, tmp_path: Path) -> None:
    gate = tmp_path / "sim-gate"
    gate.touch()
    port = free_port()
    lane.write_config(web_listen=f"127.0.0.1:{port}")
    lane.extra_env["LANE_RUNNER_SIM_GATE"] = str(gate)
    task = lane.add("held at its first event")
    lane.start()
    url = f"http://127.0.0.1:{port}/api/v1/state"

    def run_in_flight() -> dict[str, Any] | None:
        try:
            runs = _get(url)["runs"]
        except OSError:
            return None
        ready = [r for r in runs if r["session_id"] and r["heartbeat_age"] is not None]
        return ready[0] if ready else None

    lane.wait(lambda: run_in_flight() is not None, what="a run with its session in the state")
    run = run_in_flight()
    assert run is not None
    assert run["task_id"] == task.id and run["board"] == "work"
    assert run["turn"] == 1 and run["provider"] is not None
    assert run["session_id"] == lane.lane_state(task.id)["sessions"][run["provider"]]
    assert run["lease_left"] > 0 and run["last_message"]
    gate.unlink()
    lane.wait(lambda: lane.board.get_task(task.id).status is Status.DONE, what="the run's end")
    lane.wait(lambda: _get(url)["runs"] == [], what="no run in flight")
    daemon = lane.daemons[0]
    daemon.send_signal(signal.SIGTERM)  # the console's thread ends with the daemon
    assert daemon.wait(timeout=60) == 0
    with pytest.raises(OSError):
        _get(url)


def test_a_console_that_cannot_listen_stops_the_start(lane: Lane) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        lane.write_config(web_listen=f"127.0.0.1:{taken.getsockname()[1]}")
        started = lane.cli("run", "--until-idle")
    assert started.returncode == 2
    assert "web_listen" in started.stderr and "cannot listen" in started.stderr
