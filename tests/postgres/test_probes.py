"""/healthz and /readyz of a real daemon, over HTTP, on the address a pod binds.

A transaction holding the boards table (as a long migration would) first keeps the
daemon in recovery, then stops its loop mid-turn: the probes say "alive, not ready",
then "ready", then "not alive", and recover with the loop.
"""

from __future__ import annotations

import signal
import socket
import urllib.error
import urllib.request

import psycopg

from .conftest import Fleet

#: Another loopback address: a listener bound to 127.0.0.1 alone never answers on it,
#: one bound to every address (0.0.0.0, as in a pod) does.
OTHER_ADDRESS = "127.0.0.2"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(port: int, path: str, host: str = OTHER_ADDRESS) -> tuple[int, str] | None:
    """The status and body at ``path``, or None when nothing listens there."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (ConnectionRefusedError, urllib.error.URLError):
        return None


def holding_boards(url: str) -> psycopg.Connection:  # type: ignore[type-arg]
    """A connection whose open transaction holds the boards table: every read waits."""
    connection = psycopg.connect(url)
    connection.execute("LOCK TABLE boards IN ACCESS EXCLUSIVE MODE")
    return connection


def test_probes_follow_recovery_and_the_loop(fleet: Fleet) -> None:
    pod = fleet.pod("pod-a")
    port = free_port()
    pod.write_config(metrics_port=port, metrics_address="0.0.0.0", health_timeout=1.0)
    blocker = holding_boards(fleet.url)
    daemon = pod.start()
    try:
        fleet.wait(lambda: get(port, "/readyz") is not None, 60, "the metrics listener")
        assert get(port, "/readyz") == (503, "recovering\n")
        assert get(port, "/healthz") == (200, "recovering\n")  # a long replay is no death
        blocker.rollback()
        fleet.wait(lambda: get(port, "/readyz") == (200, "serving\n"), 60, "ready")
        assert get(port, "/healthz") == (200, "the loop turns\n")
        assert "lane_runner_claims" in get(port, "/metrics")[1]  # type: ignore[index]

        blocker.execute("LOCK TABLE boards IN ACCESS EXCLUSIVE MODE")  # the loop stops
        fleet.wait(lambda: get(port, "/healthz")[0] == 503, 60, "unhealthy")  # type: ignore[index]
        status, reason = get(port, "/healthz")  # type: ignore[misc]
        assert "has not completed a healthy turn" in reason
        assert get(port, "/readyz") == (200, "serving\n")  # ready, but not alive: restart it
        blocker.rollback()
        fleet.wait(lambda: get(port, "/healthz") == (200, "the loop turns\n"), 60, "healthy")
    finally:
        blocker.close()
        daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0, pod.log_tail()
    assert get(port, "/healthz") is None  # the listener went with the daemon


def test_metrics_bind_loopback_unless_told_otherwise(fleet: Fleet) -> None:
    pod = fleet.pod("pod-a")
    port = free_port()
    pod.write_config(metrics_port=port)
    daemon = pod.start()
    try:
        fleet.wait(lambda: get(port, "/readyz", host="127.0.0.1") is not None, 60, "listener")
        assert get(port, "/readyz", host=OTHER_ADDRESS) is None
    finally:
        daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0, pod.log_tail()
