"""The image, run both ways it is documented, on the shipped manifests' settings.

Each pod works tasks from the PostgreSQL board with the simulated CLIs (as the worker
user, the daemon root with the manifest's capabilities), is killed with SIGKILL
mid-run and started again on the same volumes: every task is done exactly once and
the runs the kill cut short come back as ``reclaimed``, not failed (or commit, when
their result was accepted just before). Then it is
stopped with runs in flight: the daemon ends them after its grace and exits by
itself (exit 0, not the SIGKILL at the end of the pod's grace), they stay claimed,
and the next start finishes them.
"""

from __future__ import annotations

import tomllib

import pytest

from lane_runner.board.model import Outcome
from lane_runner.service.recovery import RESTART_REASON
from tests.harness import assert_done_exactly_once

from .conftest import (
    MANIFESTS,
    PREPARE_WORKSPACE,
    KubePod,
    Pod,
    SystemdPod,
    get,
    manifest,
    wait,
)

SLOW = "[sim:slow:0.4:10]"  # about 4 s of provider work: runs are in flight when killed
LONGER = "[sim:slow:0.5:30]"  # about 15 s: outlasts the shutdown grace


def test_the_pods_grace_outlasts_the_runners_shutdown() -> None:
    """SIGTERM: shutdown_grace for the agents, as long again for their runs to settle."""
    pod = manifest("statefulset.yaml")["spec"]["template"]["spec"]
    config = tomllib.loads(manifest("configmap.yaml")["data"]["config.toml"])
    assert pod["terminationGracePeriodSeconds"] > 2 * config["shutdown_grace"]
    (container,) = pod["containers"]
    assert container["ports"][0]["containerPort"] == config["metrics_port"]
    assert config["metrics_address"] == "0.0.0.0"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


#: Manifests the kustomization names as optional, commented out: they must be edited to
#: the cluster first (the NetworkPolicy's selectors of the board and of Prometheus).
OPTIONAL = ("networkpolicy.yaml", "console-service.yaml")


def test_the_kustomization_lists_every_manifest_and_the_service_selects_the_pods() -> None:
    listed = manifest("kustomization.yaml")["resources"]
    assert sorted([*listed, *OPTIONAL]) == sorted(p.name for p in MANIFESTS.glob("*.yaml")
                                                  if p.name != "kustomization.yaml")
    text = (MANIFESTS / "kustomization.yaml").read_text()
    assert all(f"  # - {name}\n" in text for name in OPTIONAL)
    statefulset, service = manifest("statefulset.yaml"), manifest("service.yaml")
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert statefulset["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"


def survives_kill_and_stop(pod: Pod, grace: int) -> None:
    wait(lambda: get(pod.port, "/readyz") == (200, "serving\n"), 300, "a ready pod", pod.logs)
    pod.exec_as_worker(PREPARE_WORKSPACE)
    node = (pod.home().root / "node-id").read_text().strip()

    pod.add(12, SLOW)
    wait(
        lambda: pod.board.counts()["done"] >= 2 and len(pod.board.running_runs()) >= 2,
        300, "runs in flight", pod.logs,
    )
    pod.kill()
    cut = {run.id for run in pod.board.running_runs(node)}
    assert cut, "the kill should have cut runs short"
    pod.start()
    wait(lambda: pod.board.counts()["done"] == 12, 900, "every task done", pod.logs)
    assert_done_exactly_once(pod.board, [pod.home()])
    # A cut run comes back to ready (reclaimed, no failure counted), unless its result
    # was accepted just before the kill: then the restart commits that one.
    runs = [run for task in pod.board.list_tasks() for run in pod.board.runs(task.id)]
    reclaimed = {run.id for run in runs if run.outcome is Outcome.RECLAIMED}
    assert reclaimed and reclaimed <= cut
    assert {run.outcome for run in runs} == {Outcome.COMPLETED, Outcome.RECLAIMED}
    assert all(run.reason == RESTART_REASON for run in runs if run.id in reclaimed)

    pod.add(2, LONGER)
    wait(lambda: len(pod.board.running_runs(node)) == 2, 300, "two long runs", pod.logs)
    assert pod.stop(grace) == 0, pod.logs()
    assert len(pod.board.running_runs(node)) == 2  # claimed still: the next start resumes them
    pod.start()
    wait(lambda: pod.board.counts()["done"] == 14, 900, "the long tasks done", pod.logs)
    assert "grace period over: terminating 2 process trees" in pod.logs()
    assert_done_exactly_once(pod.board, [pod.home()])


#: Building the image from cold (Debian base, npm, PyPI) takes minutes; later runs
#: reuse podman's layer cache.
SLOW_TEST = pytest.mark.timeout(2400)


@SLOW_TEST
def test_the_daemon_as_pid_1_from_the_shipped_manifests(kube_pod: KubePod) -> None:
    kube_pod.play()
    survives_kill_and_stop(kube_pod, kube_pod.grace)
    worker_cannot = kube_pod.podman(
        "exec", "--user", "lane-worker", kube_pod.container, "sh", "-c",
        "cat /var/lib/lane-runner/node-id; ls /var/lib/lane-runner; cat /proc/1/environ",
        check=False,
    )
    assert worker_cannot.stderr.count("Permission denied") == 3, worker_cannot
    assert "LANE_RUNNER_BOARD_URL" not in worker_cannot.stdout


@SLOW_TEST
def test_systemd_as_pid_1_running_the_shipped_unit(systemd_pod: SystemdPod) -> None:
    systemd_pod.run()
    survives_kill_and_stop(systemd_pod, grace=90)  # the unit's TimeoutStopSec
    assert "timed out" not in systemd_pod.logs()  # systemd never had to SIGKILL the daemon
