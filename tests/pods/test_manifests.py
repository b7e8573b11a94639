"""The shipped manifests bound what a pod may take of its node (issue 48, item 7): every
container has CPU and memory requests and limits (the cgroup limits concurrency = 0
sizes its slots to), every emptyDir a sizeLimit, and the optional NetworkPolicy lets
the pods reach only DNS, the board's database and HTTPS outside the private ranges.
Read with pyyaml: no cluster, no podman."""

from __future__ import annotations

import ipaddress
import tomllib
from typing import Any

from lane_runner.service import sizing

from .conftest import manifest


def _pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = manifest("statefulset.yaml")["spec"]["template"]["spec"]
    return spec


def _quantity(text: str) -> float:
    """A Kubernetes quantity of the forms the manifests use: 500m, 2, 64Mi, 8Gi."""
    units = {"m": 1e-3, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for unit, factor in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def test_every_container_has_requests_and_limits() -> None:
    spec = _pod_spec()
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    assert len(containers) == 2
    for container in containers:
        resources = container.get("resources") or {}
        for kind in ("requests", "limits"):
            assert set(resources.get(kind) or {}) >= {"cpu", "memory"}, (container["name"], kind)
        for resource in ("cpu", "memory"):
            request = _quantity(str(resources["requests"][resource]))
            assert 0 < request <= _quantity(str(resources["limits"][resource])), container["name"]


def test_every_empty_dir_has_a_size_limit() -> None:
    empty_dirs = [v for v in _pod_spec()["volumes"] if "emptyDir" in v]
    assert empty_dirs
    for volume in empty_dirs:
        assert _quantity(str((volume["emptyDir"] or {}).get("sizeLimit", "0"))) > 0, volume


def test_the_pods_limits_size_its_slots() -> None:
    """concurrency = 0 in the ConfigMap, so the runner's slots follow the limits: a run's
    memory each, within the memory the runner's memory is requested at (no overcommit)."""
    config = tomllib.loads(manifest("configmap.yaml")["data"]["config.toml"])
    assert config["concurrency"] == 0
    (runner,) = _pod_spec()["containers"]
    limits = runner["resources"]["limits"]
    assert runner["resources"]["requests"]["memory"] == limits["memory"]
    found = sizing.Limits(int(_quantity(limits["memory"])), _quantity(str(limits["cpu"])))
    assert sizing.derived_concurrency(found, config.get("memory_per_run_mb", 2048)) >= 2


def test_the_network_policy_allows_dns_the_board_and_public_https_only() -> None:
    policy = manifest("networkpolicy.yaml")
    labels = manifest("statefulset.yaml")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    egress = policy["spec"]["egress"]
    ports = sorted({(p["port"], p["protocol"]) for rule in egress for p in rule["ports"]})
    assert ports == [(53, "TCP"), (53, "UDP"), (443, "TCP"), (5432, "TCP")]
    assert all(rule.get("to") for rule in egress), "every egress rule names where to"
    blocks = [peer["ipBlock"] for rule in egress for peer in rule["to"] if "ipBlock" in peer]
    metadata = ipaddress.ip_address("169.254.169.254")
    for block in blocks:
        excepted = [ipaddress.ip_network(cidr) for cidr in block.get("except", [])]
        assert any(metadata in network for network in excepted), block
        assert any(ipaddress.ip_address("10.1.2.3") in network for network in excepted)
    [ingress] = policy["spec"]["ingress"]
    assert [p["port"] for p in ingress["ports"]] == ["metrics"]
