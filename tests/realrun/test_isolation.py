"""Nothing leaves the machine: inside the real runs' network namespace only loopback exists,
and on it only the scripted model server answers."""

from __future__ import annotations

import json
import socket
import subprocess

from .conftest import ModelServer, RealLane, Scratch

#: Run inside the namespace as the CLIs are: what a process there can reach.
PROBE = r"""
import json, socket, sys

def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=3):
            return "connected"
    except OSError as error:
        return type(error).__name__

def resolve(name):
    try:
        socket.getaddrinfo(name, 443)
        return "resolved"
    except OSError as error:
        return type(error).__name__

server, host_port = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps({
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "server": connect("127.0.0.1", server),
    "host_loopback": connect("127.0.0.1", host_port),
    "internet": connect("1.1.1.1", 443),
    "internet6": connect("2606:4700:4700::1111", 443),
    "dns": resolve("api.openai.com"),
}))
"""


def test_only_loopback_and_the_model_server_are_reachable(
    model_server: ModelServer, scratch: Scratch
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as host_service:  # the host's own loopback
        user = ["runuser", "-u", scratch.worker.name, "--"] if scratch.worker.name else []
        argv = model_server.join([*user, "python3", "-c", PROBE, str(model_server.port),
                                  str(host_service.getsockname()[1])])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["interfaces"] == ["lo"]
    assert seen["server"] == "connected"
    assert seen["host_loopback"] == "ConnectionRefusedError", "the host's loopback is not ours"
    assert seen["internet"] == seen["internet6"] == "OSError"  # ENETUNREACH: no route at all
    assert seen["dns"] == "gaierror"


def test_doctor_passes_the_gateway_settings_the_real_runs_use(real_lane: RealLane) -> None:
    """The operator's settings the tests point the CLIs with (conftest.gateway_settings)
    are complete, and inside the namespace the scripted gateway accepts connections."""
    done = real_lane.cli("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    for provider in ("codex", "claude"):
        check = checks[f"{provider} gateway"]
        assert check["level"] == "pass", check
        assert f"127.0.0.1:{real_lane.server.port}" in check["detail"]  # type: ignore[union-attr]
