"""The real provider CLIs, offline, run as an unprivileged user: what the contract suite needs.

``.ci/run`` installs the pinned CLIs and exports where they are:

- ``LANE_CONTRACT_CODEX`` / ``LANE_CONTRACT_CLAUDE``: the real ``codex`` and ``claude``;
- ``LANE_CONTRACT_WORKER_USER``: the unprivileged user that runs them (claude refuses
  ``--dangerously-skip-permissions`` as root); needed when the tests run as root;
- ``LANE_CONTRACT_REQUIRED=1``: a missing CLI or user fails the suite instead of
  skipping it (CI sets it, so the contract cannot silently stop being checked).

Every test gets a scratch directory the worker user owns (a fresh ``HOME``,
``CODEX_HOME`` and ``CLAUDE_CONFIG_DIR``, so no earlier run's sessions leak in), and
every process started under the test's marker must be gone when it ends.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lane_runner.providers import ProviderRequest, claude, worker_environment
from schemas import load_bytes

CLAUDE = claude.ADAPTER

#: Set in every contract process's environment; leftovers are found by it.
MARK_VARIABLE = "LANE_CONTRACT_MARK"


def missing(what: str) -> None:
    message = f"{what} (.ci/run installs the pinned CLIs and sets it)"
    if os.environ.get("LANE_CONTRACT_REQUIRED") == "1":
        pytest.fail(f"LANE_CONTRACT_REQUIRED=1 but {message}", pytrace=False)
    pytest.skip(message)


def cli_path(provider: str) -> Path:
    variable = f"LANE_CONTRACT_{provider.upper()}"
    value = os.environ.get(variable)
    if not value:
        missing(f"{variable} is not set to a real {provider} CLI")
    path = Path(str(shutil.which(str(value)) or value))
    if not os.access(path, os.X_OK):
        pytest.fail(f"{variable}={value} is not an executable", pytrace=False)
    return path


@dataclass(frozen=True)
class Worker:
    """Who runs the CLIs: ``name`` None means this (unprivileged) test process itself."""

    name: str | None
    uid: int
    gid: int


@pytest.fixture(scope="session")
def worker() -> Worker:
    name = os.environ.get("LANE_CONTRACT_WORKER_USER") or None
    if name is None:
        if os.geteuid() == 0:
            missing("LANE_CONTRACT_WORKER_USER is not set and the tests run as root")
        return Worker(None, os.geteuid(), os.getegid())
    entry = pwd.getpwnam(name)
    return Worker(name, entry.pw_uid, entry.pw_gid)


@dataclass
class Scratch:
    root: Path
    worker: Worker
    mark: str

    def path(self, *parts: str, directory: bool = False) -> Path:
        path = self.root.joinpath(*parts)
        if directory:
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, self.worker.uid, self.worker.gid)
        return path

    def file(self, name: str, data: bytes) -> Path:
        """A file the runner writes and the worker reads (root-owned, 0644)."""
        path = self.root / name
        path.write_bytes(data)
        path.chmod(0o644)
        return path


#: Where the scratch directories go: not under the system temp dir (``/tmp``). Their
#: ``CODEX_HOME`` is in them, and codex refuses to make its helper aliases
#: (``codex-linux-sandbox``, ``apply_patch``) in a ``CODEX_HOME`` under the temp dir
#: ("Refusing to create helper binaries under temporary dir"). Without them its sandbox
#: cannot re-enter itself through a system bubblewrap without ``--argv0`` (Debian 12's
#: 0.8.0): bwrap looks the bare name up on ``PATH`` and every sandboxed command fails with
#: "bwrap: execvp codex-linux-sandbox". A worker's own ``~/.codex`` is not under
#: ``/tmp`` unless its home is (docs/security.md).
SCRATCH_PARENT = Path("/var/tmp")


@pytest.fixture
def scratch(worker: Worker) -> Iterator[Scratch]:
    """A directory outside pytest's 0700 tree, so the worker user can reach it, and
    outside the system temp dir (``SCRATCH_PARENT``)."""
    root = Path(tempfile.mkdtemp(prefix="lane-contract-", dir=SCRATCH_PARENT))
    root.chmod(0o755)
    os.chown(root, worker.uid, worker.gid)
    made = Scratch(root, worker, uuid.uuid4().hex)
    try:
        yield made
        assert marked_processes(made.mark) == [], "a CLI process outlived its attempt"
    finally:
        for pid in marked_processes(made.mark):
            os.kill(pid, 9)  # only processes carrying this test's own marker
        shutil.rmtree(root, ignore_errors=True)


def marked_processes(mark: str, settle: float = 5.0) -> list[int]:
    """Live processes whose environment carries ``mark``; waits briefly for exits in flight."""
    needle = f"{MARK_VARIABLE}={mark}".encode()
    deadline = time.monotonic() + settle
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue  # gone, or not ours to read: not one of our CLIs either
            if needle in environ.split(b"\0") and state != "Z":
                found.append(int(entry.name))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


RequestFactory = Callable[..., ProviderRequest]


@pytest.fixture
def real_request(scratch: Scratch) -> RequestFactory:
    """A ``ProviderRequest`` for the real CLI, as the runner builds one, run as the worker."""
    schema = scratch.file("worker-result.wire.json", load_bytes("worker-result.wire.json"))
    settings = scratch.file("claude-settings.json", CLAUDE.settings_file().encode())
    home = scratch.path("home", directory=True)
    workspace = scratch.path("workspace", directory=True)
    counter = iter(range(1, 1000))

    def build(provider: str, **overrides: Any) -> ProviderRequest:
        number = next(counter)
        extra = {
            "CODEX_HOME": str(scratch.path("home", ".codex", directory=True)),
            "CLAUDE_CONFIG_DIR": str(scratch.path("home", ".claude", directory=True)),
            MARK_VARIABLE: scratch.mark,
        }
        fields: dict[str, Any] = {
            "provider": provider,
            "executable": cli_path(provider),
            "model": "gpt-5.5" if provider == "codex" else "claude-sonnet-4-5",
            "effort": "high",
            "prompt": "Say hello.",
            "workspace": workspace,
            "schema_path": schema,
            "settings_path": settings,
            "result_file": scratch.path(f"t1.run-1.provider-{number}.result.json"),
            "session_id": str(uuid.uuid4()) if provider == "claude" else None,
            "resume": False,
            "log_path": scratch.root / "logs" / "t1.log",
            "env": worker_environment(provider, home, extra),
            "deadline": time.monotonic() + 120,
            "heartbeat_interval": 0.5,
            # Offline, codex's own word ends it once its reconnects are spent (about 7 s);
            # claude ends by itself: only a hang would meet the stall clock.
            "stall_timeout": 120.0,
            "kill_grace": 2.0,
            "run_as": scratch.worker.name,
        }
        fields.update(overrides)
        return ProviderRequest(**fields)

    return build
