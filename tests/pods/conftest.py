"""The container image and the shipped manifests, run with podman.

Podman runs as root here with runc and explicit ulimits (a containers.conf made for
the session), and with the host's network, so a pod reaches the PostgreSQL server
on 127.0.0.1 as it would reach its database service in a cluster. The image is
built from the repository's Containerfile (podman's layer cache makes a rebuild
cheap); its base, when missing, from Debian packages (``deploy/image/debian-base``),
since no image registry is reachable.

``podman kube play`` plays Pods, not StatefulSets: ``pod_of`` turns the shipped
StatefulSet into the Pod and PersistentVolumeClaims Kubernetes would make of it for
ordinal 0, keeping every container field (probes, securityContext, env, mounts) as
shipped. Its Secret becomes a podman secret in the form ``kube play`` reads.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from filelock import FileLock

from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import NewTask
from lane_runner.board.postgres.store import PostgresStore
from lane_runner.board.sql.board import SqlBoard
from lane_runner.home import Home
from tests.harness import toml_value

REPOSITORY = Path(__file__).parents[2]
MANIFESTS = REPOSITORY / "deploy" / "k8s"
IMAGE = "localhost/lane-runner:test"
BOARD = "main"
#: Where the README has operators clone the repositories tasks work in.
WORKSPACE = "/var/lib/lane-worker/src/demo"
#: Shorter than the shipped 30 s to keep the test short; the pod's grace stays as shipped.
SHUTDOWN_GRACE = 5.0
#: The worker user's first steps (README, "Deployment"): a git identity, a repository.
PREPARE_WORKSPACE = f"""
git config --global user.name lane-runner && git config --global user.email pod@example.com
git init -q -b main {WORKSPACE} && cd {WORKSPACE}
echo x > README && git add README && git commit -qm init
"""


class Podman:
    """``podman`` with this session's containers.conf."""

    def __init__(self, conf: Path) -> None:
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {done.returncode}\n{done.stderr}")
        return done

    def state(self, container: str) -> dict[str, Any]:
        answer = self("inspect", "--format", "{{json .State}}", container).stdout
        return dict(json.loads(answer))

    def volume(self, name: str) -> Path:
        return Path(self("volume", "inspect", "--format", "{{.Mountpoint}}", name).stdout.strip())


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (.ci/run installs it)")
    if os.geteuid() != 0:
        pytest.skip("the pod tests run podman as root: runc, the host network, volumes read here")
    # podman asks for more than this host grants (runc then fails with "error setting
    # rlimits"): the hard limits here, and no more processes than the kernel has pids
    # (podman caps its own process limit there).
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], pid_max)
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
    )
    return Podman(conf)


@pytest.fixture(scope="session")
def image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The image of this checkout, built once a session on the cached layers (one
    pytest-xdist worker at a time: the others then find every layer cached)."""
    with FileLock(tmp_path_factory.getbasetemp().parent / "lane-runner-image.lock"):
        return build_image(podman)


def build_image(podman: Podman) -> str:
    base = next(
        line.split()[1]
        for line in (REPOSITORY / "Containerfile").read_text().splitlines()
        if line.startswith("FROM ")
    )
    if podman("image", "exists", base, check=False).returncode != 0:
        if shutil.which("mmdebstrap") is None:
            pytest.skip(f"no {base} image and no mmdebstrap to build it (.ci/run installs it)")
        built = subprocess.run(
            [str(REPOSITORY / "deploy" / "image" / "debian-base"), base],
            env=podman.env, capture_output=True, text=True, timeout=1800,
        )
        assert built.returncode == 0, built.stderr[-3000:]
    secret = []
    trusted = ssl.get_default_verify_paths().openssl_cafile  # a TLS-inspecting proxy's CA too
    if os.path.isfile(trusted):
        secret = ["--secret", f"id=extra-ca,src={trusted}"]
    podman(
        "build", *secret, "-t", IMAGE, "-f", str(REPOSITORY / "Containerfile"), str(REPOSITORY),
        timeout=1800,
    )
    return IMAGE


def manifest(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((MANIFESTS / name).read_text()))


def pod_of(statefulset: dict[str, Any], image: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The Pod ``<name>-0`` and the claims a StatefulSet controller would make for it."""
    name = statefulset["metadata"]["name"]
    template = json.loads(json.dumps(statefulset["spec"]["template"]))
    spec = template["spec"]
    for container in spec.get("initContainers", []) + spec["containers"]:
        container["image"] = image
    claims = []
    for claim in statefulset["spec"]["volumeClaimTemplates"]:
        claim_name = f"{claim['metadata']['name']}-{name}-0"
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": claim_name}, "spec": claim["spec"]})
        spec["volumes"].append(
            {"name": claim["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim_name}}
        )
    # Init containers run at every start of a pod, as in Kubernetes (podman's default,
    # "once", also races its own removal of the finished init container on a busy host).
    annotations = {"io.podman.annotations.init.container.type": "always"}
    metadata = {"name": f"{name}-0", "labels": template["metadata"]["labels"],
                "annotations": annotations}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return pod, claims


def free_port() -> int:
    """A port nothing listens on now (the pod shares the host's network)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(port: int, path: str) -> tuple[int, str] | None:
    """Status and body of ``path`` on the pod's metrics port; None while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (ConnectionError, urllib.error.URLError):
        return None


def wait(condition: Callable[[], bool], timeout: float, what: str, logs: Callable[[], str]) -> None:
    """Poll ``condition``; a board that does not answer in its budget (a loaded host, the
    database busy with the pod's reconnections) just means "not yet"."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(BoardUnavailable):
            if condition():
                return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}\n{logs()[-4000:]}")


class Pod:
    """One runner in a container of the image, on the test database; how it is started
    (kube play, or podman run with systemd) is the subclass's."""

    container: str
    volumes: list[str]

    def __init__(self, podman: Podman, image: str, board_url: str, workdir: Path) -> None:
        self.podman, self.image, self.board_url, self.workdir = podman, image, board_url, workdir
        self.port = free_port()  # the pod shares the host's network
        self.store = PostgresStore(board_url)
        self.store.create_board(BOARD)

    @property
    def board(self) -> SqlBoard:
        return self.store.board(BOARD)

    def settings(self) -> dict[str, object]:
        """What the test changes in the shipped configuration."""
        return {"simulate": True, "metrics_port": self.port, "shutdown_grace": SHUTDOWN_GRACE}

    def exec_as_worker(self, script: str) -> None:
        self.podman("exec", "--user", "lane-worker", self.container, "sh", "-ec", script)

    def add(self, count: int, body: str) -> None:
        for index in range(count):
            self.board.add_task(NewTask(title=f"task {index}", body=body, workspace=WORKSPACE))

    def home(self) -> Home:
        return Home(self.podman.volume(self.volumes[0]))

    def kill(self) -> None:
        """kill -9 of the container's PID 1: everything in it dies at once."""
        self.podman("kill", "--signal", "KILL", self.container)
        self.podman("wait", self.container, check=False)

    def start(self) -> None:
        """Start the stopped container again, on the same volumes."""
        if not self.podman.state(self.container)["Running"]:
            self.podman("start", self.container)

    def stop(self, grace: int) -> int:
        """``podman stop`` with ``grace`` seconds before SIGKILL; the exit code."""
        self.podman("stop", "--time", str(grace), self.container, timeout=grace + 60)
        return int(self.podman.state(self.container)["ExitCode"])

    def logs(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        for volume in self.volumes:
            self.podman("volume", "rm", "--force", volume, check=False)
        self.store.close()


class KubePod(Pod):
    """The shipped manifests, played: the daemon as PID 1."""

    def __init__(self, podman: Podman, image: str, board_url: str, workdir: Path) -> None:
        super().__init__(podman, image, board_url, workdir)
        self.statefulset = manifest("statefulset.yaml")
        self.pod, claims = pod_of(self.statefulset, image)
        self.claims = claims
        self.name = self.pod["metadata"]["name"]
        self.container = f"{self.name}-{self.pod['spec']['containers'][0]['name']}"
        self.config = manifest("configmap.yaml")
        self.secret = manifest("secret.yaml")
        self.volumes = [c["metadata"]["name"] for c in claims] + [self.config["metadata"]["name"]]

    @property
    def grace(self) -> int:
        return int(self.statefulset["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])

    def play(self) -> None:
        """The Secret as a podman secret, then the ConfigMap, the claims and the Pod."""
        settings = {**tomllib.loads(self.config["data"]["config.toml"]), **self.settings()}
        self.config["data"]["config.toml"] = "".join(
            f"{key} = {toml_value(value)}\n" for key, value in settings.items()
        )
        # The host's network (the database is on its loopback): podman maps no ports
        # there, so the probes name the metrics port by its number, the test's.
        container = self.pod["spec"]["containers"][0]
        named = {port["name"] for port in container.pop("ports")}
        for probe in ("readinessProbe", "livenessProbe"):
            if container[probe]["httpGet"]["port"] in named:
                container[probe]["httpGet"]["port"] = self.port
        values = {**self.secret["stringData"], "LANE_RUNNER_BOARD_URL": self.board_url}
        secret = self.workdir / "secret.json"  # the form podman's kube play reads secrets in
        secret.write_text(
            json.dumps({k: base64.b64encode(v.encode()).decode() for k, v in values.items()})
        )
        self.podman("secret", "create", self.secret["metadata"]["name"], str(secret))
        played = self.workdir / "pod.yaml"
        played.write_text(yaml.safe_dump_all([self.config, *self.claims, self.pod]))
        self.podman("kube", "play", "--network", "host", str(played))

    def logs(self) -> str:
        done = self.podman("logs", self.container, check=False)
        return done.stdout + done.stderr

    def close(self) -> None:
        # --volumes: its emptyDir is an anonymous volume, which removing the pod keeps.
        self.podman("rm", "--force", "--volumes", "--time", "0", self.container, check=False)
        self.podman("pod", "rm", "--force", "--time", "0", self.name, check=False)
        self.podman("secret", "rm", self.secret["metadata"]["name"], check=False)
        super().close()


class SystemdPod(Pod):
    """The image's other entry point: systemd as PID 1 running the shipped unit."""

    container = "lane-runner-systemd-test"

    def __init__(self, podman: Podman, image: str, board_url: str, workdir: Path) -> None:
        super().__init__(podman, image, board_url, workdir)
        self.volumes = [f"{self.container}-{name}" for name in ("home", "worker", "journal")]

    def run(self) -> None:
        """Settings in the unit's EnvironmentFile, where an operator keeps secrets too."""
        environment = self.workdir / "lane-runner.env"
        environment.write_text(
            f"LANE_RUNNER_BOARD_URL={self.board_url}\n"
            + "".join(f"LANE_RUNNER_{k.upper()}={v}\n" for k, v in self.settings().items())
        )
        environment.chmod(0o600)
        home, worker, journal = self.volumes
        self.podman(
            "run", "--detach", "--name", self.container, "--systemd=always", "--network", "host",
            "--volume", f"{home}:/var/lib/lane-runner",
            "--volume", f"{worker}:/var/lib/lane-worker",
            "--volume", f"{journal}:/var/log/journal",  # the journal outlives a restart
            "--volume", f"{environment}:/etc/lane-runner/lane-runner.env:ro",
            self.image, "/sbin/init",
        )

    def logs(self) -> str:
        done = self.podman(
            "exec", self.container, "journalctl", "--no-pager", "-o", "cat", "-u", "lane-runner",
            check=False,
        )
        return done.stdout + done.stderr

    def close(self) -> None:
        self.podman("rm", "--force", "--volumes", "--time", "0", self.container, check=False)
        super().close()


@pytest.fixture
def kube_pod(
    podman: Podman, image: str, postgres_database: str, tmp_path: Path
) -> Iterator[KubePod]:
    pod = KubePod(podman, image, postgres_database, tmp_path)
    if podman("pod", "exists", pod.name, check=False).returncode == 0:
        pytest.skip(f"a pod {pod.name} exists on this host already; not touching it")
    try:
        yield pod
    finally:
        pod.close()


@pytest.fixture
def systemd_pod(
    podman: Podman, image: str, postgres_database: str, tmp_path: Path
) -> Iterator[SystemdPod]:
    pod = SystemdPod(podman, image, postgres_database, tmp_path)
    if podman("container", "exists", pod.container, check=False).returncode == 0:
        pytest.skip(f"a container {pod.container} exists on this host already; not touching it")
    try:
        yield pod
    finally:
        pod.close()
