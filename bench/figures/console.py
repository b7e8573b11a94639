"""The web console's cost to the daemon: its CPU with N consoles open (each holding the
``/events`` stream a console page keeps) against none, both over the same window on an
idle daemon serving the console (``web_listen``). Target: 100 consoles under 5 % of one
core more than none (issue 45).

The consoles are raw sockets that read what the stream sends: a browser would also fetch
a page when the boards change, and the boards here do not change, so this is the cost
of keeping consoles open, which is what a day of open tabs costs.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from bench.figures.idle import WARM_UP, cpu_seconds
from bench.lane import Lane
from bench.result import Check, Figure
from bench.scale import Scale

CPU_TARGET = 5.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _open_consoles(port: int, count: int) -> list[socket.socket]:
    """``count`` open ``/events`` streams, each past its first message."""
    opened = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: console\r\nAccept: text/event-stream\r\n\r\n")
        received = b""
        while b"event: change" not in received:
            chunk = sock.recv(4096)
            if not chunk:
                raise RuntimeError(f"the console closed its stream: {received[:200]!r}")
            received += chunk
        opened.append(sock)
    return opened


def _cpu_percent(pid: int, seconds: float) -> float:
    cpu_start, wall_start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - cpu_start) / (time.monotonic() - wall_start) * 100


def measure(scale: Scale, workdir: Path) -> Figure:
    lane = Lane(workdir, boards=("a", "b", "c", "d"), concurrency=8)
    port = _free_port()
    with (lane.root / "config.toml").open("a") as config:
        config.write(f'web_listen = "127.0.0.1:{port}"\n')
    consoles: list[socket.socket] = []
    try:
        lane.start()
        assert lane.daemon is not None
        pid = lane.daemon.pid
        time.sleep(WARM_UP)
        alone = _cpu_percent(pid, scale.idle_seconds)
        consoles = _open_consoles(port, scale.console_clients)
        time.sleep(WARM_UP)
        watched = _cpu_percent(pid, scale.idle_seconds)
        still_open = sum(1 for sock in consoles if sock.fileno() >= 0)
    finally:
        for sock in consoles:
            sock.close()
        lane.stop()
    added = watched - alone
    figure = Figure(
        key="console",
        title=f"Web console: the daemon's CPU with {scale.console_clients} consoles open",
        baseline="the same daemon with no console open",
        columns=["consoles open", "window", "CPU % of one core"],
        rows=[["0", f"{scale.idle_seconds:g} s", f"{alone:.2f} %"],
              [str(still_open), f"{scale.idle_seconds:g} s", f"{watched:.2f} %"]],
    )
    figure.checks = [Check(f"{scale.console_clients} consoles add < {CPU_TARGET:g} % of a core",
                           f"{added:+.2f} %", added < CPU_TARGET)]
    figure.notes.append(
        "One poller reads the 4 boards once a second while any console is open, whatever "
        "their number (lane_runner/web/pulse.py); each stream costs a keep-alive every 15 s."
    )
    return figure
