"""Real runs: the daemon drives the real, pinned CLIs against a scripted model server.

What the contract suite (tests/contract) needs, plus:

- ``model_server``: ``bench/modelserver.py`` as the first process of a network
  namespace of its own (``bench/netns.py``), answering the CLIs by the script each
  test writes (the waste figure, bench/figures/waste.py, drives the same server);
- ``real_lane``: a home, a board and a repository the worker user owns, whose
  ``config.toml`` points the CLIs at that server with the operator's own settings
  (``codex_config``, ``codex_env``, ``claude_env``, ``opencode_env``, ``gemini_env``;
  docs/configuration.md, "Your own model gateway"), and whose daemon and commands run
  inside the namespace.

Without a namespace, the pinned CLIs or the worker user the tests skip, naming why;
``LANE_CONTRACT_REQUIRED=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench import gateway, netns
from bench.scripted import ModelServer, ServerDidNotStart
from tests.contract import conftest as contract
from tests.contract.conftest import MARK_VARIABLE, Scratch, cli_path
from tests.harness import BOARD, Lane, git

#: The contract suite's fixtures: the worker user, and a scratch directory it can reach.
worker = contract.worker
scratch = contract.scratch

#: The real CLIs every real lane is given (a fallback goes to the next installed one:
#: claude and codex to each other, as the older tests expect); ``RealLane.install``
#: gives it the others.
BASE_CLIS = ("codex", "claude")
CLIS = (*BASE_CLIS, "opencode", "gemini")
#: Fast clocks, real CLIs: a node CLI takes seconds to start on a loaded machine, so
#: the stall clock is generous unless a test is about it.
REAL_CONFIG: dict[str, object] = {
    "simulate": False,
    "concurrency": 4,
    "lease_ttl": 120.0,
    "heartbeat_interval": 0.5,
    "stall_timeout": 90.0,
    "shutdown_grace": 2.0,
    "cooldown_base": 0.3,
    "cooldown_max": 1.0,
    "failure_backoff_base": 0.0,
    "breaker_threshold": 0,
    "progress_note_interval": 0,
    "worker_env": [MARK_VARIABLE],
}


def answer(summary: str, changed: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    """A worker result, as a scripted model gives it."""
    result: dict[str, Any] = {
        "status": "completed", "summary": summary, "changed_files": changed or [],
        "tests_run": [], "artifacts": [], "findings": [], "blockers": [],
    }
    result.update(fields)
    return result


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    said = log.read_text(errors="replace")[-6000:] if log and log.exists() else ""
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{said}")


@pytest.fixture
def model_server(scratch: Scratch) -> Iterator[ModelServer]:
    reason = netns.unavailable()
    if reason is not None:
        contract.missing(f"real runs need a network namespace of their own: {reason}")
    server = ModelServer(scratch.path("model-server", directory=True))
    try:
        server.start()
    except ServerDidNotStart as error:
        pytest.fail(str(error), pytrace=False)
    yield server
    server.stop()


#: What the worker's gemini settings must select for ``GOOGLE_GEMINI_BASE_URL`` to be taken
#: (providers/gemini.py).
GEMINI_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}}}


def opencode_config(server: ModelServer) -> str:
    return gateway.opencode_config(server.port)


def gateway_settings(server: ModelServer) -> dict[str, object]:
    """The operator's settings that point every CLI at the scripted server
    (docs/configuration.md)."""
    return gateway.settings(server.port)


@dataclass
class RealLane(Lane):
    """A home whose daemon drives the real CLIs, inside the model server's namespace."""

    server: ModelServer | None = None
    scratch: Scratch | None = None

    def __post_init__(self) -> None:
        assert self.server is not None and self.scratch is not None
        self.config = {**REAL_CONFIG, **gateway_settings(self.server),
                       **{f"{name}_bin": str(cli_path(name)) for name in BASE_CLIS}}
        if self.scratch.worker.name:
            self.config["worker_user"] = self.scratch.worker.name
        super().__post_init__()
        worker = self.scratch.worker
        for path in [self.repo, *self.repo.rglob("*")]:
            os.chown(path, worker.uid, worker.gid, follow_symlinks=False)

    def environ(self) -> dict[str, str]:
        """The daemon's and the commands' environment; ``extra_env`` adds to it, and an
        empty value there takes a variable away."""
        assert self.scratch is not None
        environ = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            MARK_VARIABLE: self.scratch.mark,
            # claude's key comes from the daemon's environment, codex's from codex_env
            "ANTHROPIC_API_KEY": "scripted-claude-key",
            "CODEX_HOME": str(self.scratch.path("cli-home", ".codex", directory=True)),
            "CLAUDE_CONFIG_DIR": str(self.scratch.path("cli-home", ".claude", directory=True)),
            "GEMINI_CLI_HOME": str(self.gemini_home()),
            **self.extra_env,
        }
        return {name: value for name, value in environ.items() if value}

    def install(self, *names: str) -> None:
        """Give the daemon these real CLIs too (``<name>_bin``): a fallback may go to them."""
        self.write_config(**{f"{name}_bin": str(cli_path(name)) for name in names})

    def gemini_home(self) -> Path:
        """The workers' ``GEMINI_CLI_HOME``, its settings selecting the API-key auth."""
        assert self.scratch is not None
        home = self.scratch.path("cli-home", "gemini", directory=True)
        settings = self.scratch.path("cli-home", "gemini", ".gemini", directory=True)
        (settings / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
        os.chown(settings / "settings.json", self.scratch.worker.uid, self.scratch.worker.gid)
        return home

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        assert self.server is not None
        argv = [sys.executable, "-m", "lane_runner.cli.main", "--home", str(self.root), *args]
        return subprocess.run(self.server.join(argv), env=self.environ(), capture_output=True,
                              text=True, timeout=timeout, cwd=self.root)

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        assert self.server is not None
        log = (self.root / "daemon.log").open("ab")
        argv = [sys.executable, "-m", "lane_runner.cli.main", "--home", str(self.root), "run",
                *args]
        return subprocess.Popen(self.server.join(argv), env=self.environ(), stdout=log,
                                stderr=log, cwd=self.root)

    def commit_file(self, path: str, text: str) -> None:
        """Add a file to the repository's main branch (before any task branches off it)."""
        target = self.repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        git("-c", "safe.directory=*", "add", ".", cwd=self.repo)  # the worker's repository
        git("-c", "safe.directory=*", "commit", "-qm", f"add {path}", cwd=self.repo)
        assert self.scratch is not None
        for found in [self.repo, *self.repo.rglob("*")]:
            os.chown(found, self.scratch.worker.uid, self.scratch.worker.gid,
                     follow_symlinks=False)

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        wait_until(condition, timeout, what, self.root / "daemon.log")

    def task_log(self, task_id: str) -> str:
        path = self.home.log_file(BOARD, task_id)
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def real_lane(scratch: Scratch, model_server: ModelServer) -> Iterator[RealLane]:
    for name in CLIS:
        cli_path(name)  # skip (or fail in CI) before building anything
    lane = RealLane(scratch.path("home"), server=model_server, scratch=scratch)
    yield lane
    lane.stop_all()
    for pid in lane.live_workers():
        os.kill(pid, 9)  # only the CLIs of this home's node
    lane.store.close()


def marker(name: str) -> str:
    """A task's marker: in its title, so in every prompt, and unique to the test run."""
    return f"realrun-{name}-{uuid.uuid4().hex[:8]}"
