"""Day one with the command line (issue 27): what the runner says about work, driven
through the installed ``lane-runner`` script: the memory metric, events in ``task show``,
exit statuses of previews that say error, and a router that is down named as such."""

from __future__ import annotations

import re
import signal
import socket
import subprocess

import httpx
import orjson

from tests.harness import BOARD, Lane
from tests.operator.console import console, json_of, script


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_memory_metric_reads_what_status_reads(lane: Lane) -> None:
    port = free_port()
    lane.write_config(metrics_port=port)
    daemon = subprocess.Popen(
        [str(script()), "--home", str(lane.root), "run"], env=lane.environ(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    lane.daemons.append(daemon)

    def memory_in_status() -> int | None:
        found = json_of(console(lane, "status", "--json"))["daemon"]["memory"]
        return None if found is None else int(found["available"])

    lane.wait(lambda: memory_in_status() is not None, what="status showing memory")
    status = memory_in_status()
    assert status is not None and status > 0
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    [metric] = re.findall(r"^lane_runner_memory_available_bytes (\S+)$", text, re.M)
    # Read a moment apart: the same order of magnitude, and never the 0.0 of a gauge never set.
    assert status / 2 < float(metric) < status * 2
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0


def test_task_show_prints_events_for_people(lane: Lane) -> None:
    task = lane.add("done once")
    assert console(lane, "run", "--until-idle").returncode == 0
    shown = console(lane, "task", "show", task.id, "--board", BOARD)
    assert shown.returncode == 0, shown.stderr
    events = shown.stdout.split("\nevents:\n", 1)[1].split("\ncomments:\n", 1)[0]
    completed = next(line for line in events.splitlines() if " completed " in line)
    assert "metadata=below" in completed and "metadata.route.provider=" not in completed
    record = shown.stdout.split(" completed:\n", 1)[1]  # the run's record, in sections
    assert "route" in record and "delivery" in record and "journal_digest" in record
    assert "{'" not in shown.stdout and "': " not in shown.stdout  # no Python reprs anywhere


def _unreachable_router(lane: Lane, timeout: float = 2.0) -> None:
    """Nothing listens on the router's port; ``timeout`` long enough for every retry to end
    in a refused connection, or short enough to cut them (then: ``router timeout``)."""
    lane.write_config(router_url=f"http://127.0.0.1:{free_port()}/v1", router_timeout=timeout,
                      cooldown_base=60.0, cooldown_max=60.0)


def test_previews_that_say_error_exit_non_zero(lane: Lane) -> None:
    task = lane.add("where would it go")
    route = ["task", "route", task.id, "--board", BOARD]
    assert console(lane, *route).returncode == 0  # the static policy routes it
    _unreachable_router(lane)
    for argv in (route, ["run", "--dry-run"], [*route, "--json"], ["run", "--dry-run", "--json"]):
        done = console(lane, *argv)
        assert done.returncode == 1, (argv, done.stdout, done.stderr)
        assert "routing failed" in done.stdout


def test_a_router_that_is_down_is_not_called_capacity(lane: Lane) -> None:
    task = lane.add("no router today")
    _unreachable_router(lane, timeout=30.0)
    assert console(lane, "run", "--until-idle").returncode == 3  # left cooling down
    [run] = json_of(console(lane, "task", "show", task.id, "--board", BOARD, "--json"))["runs"]
    assert run["outcome"] == "reclaimed" and run["reason"].startswith("router unreachable: ")
    assert "capacity" not in run["reason"]
    [cycling] = json_of(console(lane, "status", "--json"))["cycling"]
    assert (cycling["task_id"], cycling["last_cause"]) == (task.id, "router unreachable")
    assert orjson.loads((lane.home.lane_dir(BOARD) / f"{task.id}.json").read_bytes())[
        "cooldowns"] == 1


def test_task_ls_says_who_ran_it_and_why_it_is_blocked(lane: Lane) -> None:
    fell_back = lane.add("codex is out", body="[sim@codex:capacity]", assignee="cli-codex-medium")
    stuck = lane.add("needs a person", body="[sim:blocked]", assignee="cli-claude-low")
    waiting = lane.add("never claimed", parents=(stuck.id,))
    assert console(lane, "run", "--until-idle").returncode == 4  # one ended blocked
    rows = {row["id"]: row for row in json_of(console(lane, "task", "ls", "--json"))}
    node = lane.node()
    assert (rows[fell_back.id]["assignee"], rows[fell_back.id]["provider"],
            rows[fell_back.id]["node"]) == ("cli-codex-medium", "claude", node)
    assert (rows[stuck.id]["status"], rows[stuck.id]["provider"], rows[stuck.id]["node"]) == (
        "blocked", "claude", node)
    assert (rows[waiting.id]["provider"], rows[waiting.id]["node"]) == (None, None)
    table = console(lane, "task", "ls").stdout.splitlines()
    assert table[0].split()[:6] == ["BOARD", "ID", "STATUS", "ASSIGNEE", "PROVIDER", "NODE"]
    assert "BLOCKED BECAUSE" in table[0]
    [line] = [row for row in table if stuck.id in row]
    assert "worker is blocked: simulated blocker" in line and node in line


def test_an_offline_codex_is_marked_unavailable_not_waited_for(lane: Lane) -> None:
    """codex that reconnects five times, then waits for the network: the attempt ends as
    an authentication failure (codex marked unavailable, the task done by claude), long
    before the 15-minute stall clock of the default configuration."""
    lane.write_config(stall_timeout=900.0)
    task = lane.add("offline codex", body="[sim@codex:reconnect-forever]",
                    assignee="cli-codex-low")
    done = console(lane, "run", "--until-idle", timeout=180)
    assert done.returncode == 0, done.stderr
    shown = json_of(console(lane, "task", "ls", "--json"))
    assert [(t["id"], t["status"], t["provider"]) for t in shown] == [(task.id, "done", "claude")]
    [codex] = [p for p in json_of(console(lane, "status", "--json"))["providers"]
               if p["provider"] == "codex"]
    assert codex["state"] == "unavailable" and "after its reconnects" in codex["reason"]
