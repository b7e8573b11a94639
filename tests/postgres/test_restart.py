"""PostgreSQL restarted under two working pods: every task still done exactly once.

The server stays down for a few seconds (stop, pause, start) so the pods meet a
real outage, not only a blink their pools would hide.

Heartbeats that fail while the server is down keep the workers (their leases are
still valid), finalizations that cannot commit wait in the journal and replay,
the pools and listeners reconnect.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from psycopg.conninfo import conninfo_to_dict

from .conftest import Fleet

TASKS = 80
SLOW = "[sim:slow:0.2:8]"  # runs in flight across the restart


OUTAGE = 3.0  # seconds the server stays down


def cluster_command(url: str) -> list[str]:
    """``pg_ctlcluster`` for the Debian cluster serving ``url`` (action appended), or skip."""
    port = str(conninfo_to_dict(url).get("port", 5432))
    if shutil.which("pg_lsclusters") is None:
        pytest.skip("pg_lsclusters not found: cannot restart the server from here")
    listing = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
    )
    for line in listing.stdout.splitlines():
        version, cluster, cluster_port, status, *_ = line.split()
        if cluster_port == port and status == "online":
            return ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster]
    pytest.skip(f"no online local cluster on port {port} to restart")


def test_postgres_restart_mid_run(fleet: Fleet) -> None:
    cluster = cluster_command(fleet.url)
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
        subprocess.run([*cluster, "stop"], capture_output=True, check=True, timeout=120)
        time.sleep(OUTAGE)
    finally:
        subprocess.run([*cluster, "start"], capture_output=True, check=True, timeout=120)
    fleet.wait(lambda: fleet.postmaster_started() != started, timeout=60, what="the restart")
    for daemon in daemons:
        assert daemon.wait(timeout=180) == 0, "\n".join(pod.log_tail() for pod in pods)
    fleet.assert_done_exactly_once()
    assert any("unavailable" in pod.log_tail(100_000) for pod in pods)  # they did notice
    for pod in pods:
        unfinished = [e for e in pod.journal_kinds() if e[0] in ("pending", "prepared") or not e[2]]
        assert unfinished == []
