"""PostgreSQL restarted under two working pods: every task still done exactly once.

The server stays down for a few seconds (stop, pause, start) so the pods meet a
real outage, not only a blink their pools would hide.

Heartbeats that fail while the server is down keep the workers (their leases are
still valid), finalizations that cannot commit wait in the journal and replay,
the pools and listeners reconnect.
"""

from __future__ import annotations

import time
from pathlib import Path

from .conftest import Fleet, OwnServer

TASKS = 80
SLOW = "[sim:slow:0.2:8]"  # runs in flight across the restart


OUTAGE = 3.0  # seconds the server stays down


def test_postgres_restart_mid_run(tmp_path: Path, own_server: OwnServer) -> None:
    """On a server of the test's own: restarting the machine's would fail whatever other
    tests run beside this one."""
    fleet = Fleet(tmp_path, own_server.url)
    try:
        restart_mid_run(fleet, own_server)
    finally:
        fleet.close()


def restart_mid_run(fleet: Fleet, server: OwnServer) -> None:
    pods = [fleet.pod("pod-a"), fleet.pod("pod-b")]
    for pod in pods:
        pod.write_config(lease_ttl=20.0)  # outlives the restart: no run is lost to its lease
    fleet.add(TASKS, slow_every=3, slow=SLOW)
    daemons = [pod.start("--until-idle") for pod in pods]
    fleet.wait(
        lambda: fleet.done() >= 15 and len(fleet.board.running_runs()) >= 3,
        timeout=120,
        what="both pods mid-run",
    )
    started = fleet.postmaster_started()
    try:
        server.stop()
        time.sleep(OUTAGE)
    finally:
        server.start()
    fleet.wait(lambda: fleet.postmaster_started() != started, timeout=60, what="the restart")
    for daemon in daemons:
        assert daemon.wait(timeout=180) == 0, "\n".join(pod.log_tail() for pod in pods)
    fleet.assert_done_exactly_once()
    assert any("unavailable" in pod.log_tail(100_000) for pod in pods)  # they did notice
    for pod in pods:
        unfinished = [e for e in pod.journal_kinds() if e[0] in ("pending", "prepared") or not e[2]]
        assert unfinished == []
