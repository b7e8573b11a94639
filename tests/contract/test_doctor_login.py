"""``lane-runner doctor`` checks each real CLI's login as the worker user (issue 27),
through the installed script: ``codex login status``, claude's key or credentials file,
and the command that logs it in as that user. Offline and without accounts: a login is
made with a dummy API key (codex stores it without asking the network)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from tests.contract.conftest import Scratch, Worker, cli_path

SCRIPT = Path(sys.executable).with_name("lane-runner")


def doctor(scratch: Scratch, worker: Worker, **env: str) -> dict[str, dict[str, Any]]:
    home = scratch.path("home", directory=True)
    lines = [f'codex_bin = "{cli_path("codex")}"', f'claude_bin = "{cli_path("claude")}"']
    if worker.name:
        lines.append(f'worker_user = "{worker.name}"')
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [str(SCRIPT), "--home", str(home), "doctor", "--json"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch.root),
             "CODEX_HOME": str(scratch.path("codex", directory=True)),
             "CLAUDE_CONFIG_DIR": str(scratch.path("claude", directory=True)), **env},
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode in (0, 1), done.stderr
    return {check["name"]: check for check in orjson.loads(done.stdout)["checks"]}


def test_doctor_fails_clis_that_are_not_logged_in_and_says_how(
    scratch: Scratch, worker: Worker
) -> None:
    checks = doctor(scratch, worker)
    codex, claude = checks["codex login"], checks["claude login"]
    assert (codex["level"], claude["level"]) == ("fail", "fail")
    assert "codex login status said: Not logged in" in codex["detail"]
    login_as = f"sudo -u {worker.name} -H " if worker.name else ""
    assert f"{login_as}codex login" in codex["fix"]
    assert f"{login_as}claude, then /login" in claude["fix"]
    assert "ANTHROPIC_API_KEY" in claude["fix"]


def test_doctor_passes_a_login_made_as_the_worker_user(scratch: Scratch, worker: Worker) -> None:
    codex_home = scratch.path("codex", directory=True)
    stored = subprocess.run(
        [str(cli_path("codex")), "login", "--with-api-key"], input="sk-dummy-for-the-test\n",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch.root),
             "CODEX_HOME": str(codex_home)},
        cwd=scratch.root, capture_output=True, text=True, timeout=60,
        **({"user": worker.uid, "group": worker.gid, "extra_groups": []} if worker.name else {}),
    )
    assert stored.returncode == 0, stored.stderr
    checks = doctor(scratch, worker)
    assert checks["codex login"]["level"] == "pass", checks["codex login"]
    assert checks["claude login"]["level"] == "warn"  # codex lanes run; claude's fall back
    (scratch.path("claude", directory=True) / ".credentials.json").write_text("{}")
    assert doctor(scratch, worker)["claude login"]["level"] == "pass"


def test_doctor_passes_a_claude_key_that_reaches_the_workers(
    scratch: Scratch, worker: Worker
) -> None:
    checks = doctor(scratch, worker, ANTHROPIC_API_KEY="sk-ant-dummy")
    assert checks["claude login"]["level"] == "pass"
    assert checks["claude login"]["detail"] == "ANTHROPIC_API_KEY reaches the claude workers"
