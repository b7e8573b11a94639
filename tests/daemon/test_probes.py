"""The probes' verdicts (lane_runner/service/probes.py), without a clock: the daemon and
HTTP are in tests/postgres/test_probes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.errors import UsageError
from lane_runner.service.probes import Health, Phase, Verdict, liveness


def test_a_serving_loop_is_alive_until_its_last_healthy_turn_is_too_old() -> None:
    assert liveness(Phase.SERVING, 119.0, 120.0) == Verdict(True, "the loop turns")
    stale = liveness(Phase.SERVING, 121.0, 120.0)
    assert not stale.ok and "not completed a healthy turn for 121 s" in stale.reason


@pytest.mark.parametrize("phase", [Phase.RECOVERING, Phase.STOPPING])
def test_recovery_and_shutdown_are_never_taken_for_death(phase: Phase) -> None:
    assert liveness(phase, 10_000.0, 1.0) == Verdict(True, phase.value)


def test_ready_only_while_serving() -> None:
    health = Health(timeout=120.0)
    assert health.ready() == Verdict(False, "recovering")
    health.serving()
    assert health.ready() == Verdict(True, "serving") and health.live().ok
    health.stopping()
    assert health.ready() == Verdict(False, "stopping") and health.live().ok


@pytest.mark.parametrize(("given", "bound"), [("0.0.0.0", "0.0.0.0"), ("::", "::"),
                                               (" 10.0.0.7 ", "10.0.0.7")])
def test_metrics_address_is_an_ip_address(tmp_path: Path, given: str, bound: str) -> None:
    cfg = config.load(tmp_path, {"LANE_RUNNER_METRICS_ADDRESS": given})
    assert cfg.metrics_address == bound


def test_a_host_name_for_metrics_address_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="metrics_address.*0.0.0.0 .every IPv4 address"):
        config.load(tmp_path, {"LANE_RUNNER_METRICS_ADDRESS": "pod.local"})
    assert config.load(tmp_path, {}).metrics_address == "127.0.0.1"
