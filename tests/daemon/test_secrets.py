"""Credentials in ``router_url`` and ``board_url`` never leave the configuration.

Each test plants a secret in the URLs, runs the daemon and the operator commands
against that home, then reads every output and every file of the home (and the
board) looking for it.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import orjson
import pytest

from lane_runner import config
from lane_runner.board.model import Outcome
from lane_runner.cli import doctor_clis, login
from tests.harness import BOARD, Lane

PASSWORD = "hunter2-router-pw"
TOKEN = "tok-9f8e7d6c"
BOARD_PASSWORD = "hunter2-board-pw"
SECRETS = (PASSWORD, TOKEN, BOARD_PASSWORD)


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def files_of(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (the home, boards included) by relative name,
    but ``config.toml``: the one place the secret belongs."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and path.name != "config.toml"
    }


def leaks(outputs: dict[str, str | bytes]) -> list[str]:
    found = []
    for where, text in outputs.items():
        data = text.encode() if isinstance(text, str) else text
        found += [f"{secret} in {where}" for secret in SECRETS if secret.encode() in data]
    return found


def commands(lane: Lane, task_id: str) -> dict[str, str | bytes]:
    outputs: dict[str, str | bytes] = {}
    for args in (
        ("config", "show"),
        ("config", "show", "--json"),
        ("doctor",),
        ("doctor", "--json"),
        ("status",),
        ("status", "--json"),
        ("task", "show", "--board", BOARD, task_id),
        ("task", "show", "--board", BOARD, task_id, "--json"),
        ("task", "ls", "--board", BOARD),
        ("journal", "verify"),
        ("logs", "--board", BOARD, task_id),
    ):
        done = lane.cli(*args)
        outputs[" ".join(args)] = done.stdout + done.stderr
    return outputs


def test_router_credentials_reach_no_log_reason_command_or_file(lane: Lane) -> None:
    url = f"http://lane:{PASSWORD}@127.0.0.1:{closed_port()}/v1/chat/completions?token={TOKEN}"
    lane.write_config(router_url=url)
    task = lane.add("route me", body="[sim:ok]")
    daemon = lane.start()
    lane.wait(
        lambda: any(run.outcome is not None for run in lane.runs(task.id)),
        what="the routing failure to end a run",
        timeout=240,
    )
    run = next(run for run in lane.runs(task.id) if run.outcome is not None)
    assert run.outcome is Outcome.RECLAIMED  # a cooldown, not a counted failure
    assert "routing failed" in (run.reason or "") and "lane:***@127.0.0.1" in (run.reason or "")
    outputs = commands(lane, task.id)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    outputs.update(files_of(lane.root))
    assert "router http://lane:***@" in outputs["daemon.log"].decode()  # it did log the URL
    assert leaks(outputs) == []


def test_board_credentials_reach_no_log_command_or_file(lane: Lane, postgres_database: str) -> None:
    scheme, _, rest = postgres_database.partition("://")
    user, _, where = rest.partition("@")
    url = f"{scheme}://{user}:{BOARD_PASSWORD}@{where}"  # trust auth: the password is unused
    lane.write_config(
        board_url=url, router_url=f"http://lane:{PASSWORD}@127.0.0.1:{closed_port()}/"
    )
    assert lane.cli("board", "create", BOARD).returncode == 0
    added = lane.cli(
        "task",
        "add",
        "--board",
        BOARD,
        "--title",
        "t",
        "--body",
        "[sim:ok]",
        "--workspace",
        str(lane.repo),
        "--json",
    )
    assert added.returncode == 0, added.stderr
    task_id = orjson.loads(added.stdout)["id"]
    daemon = lane.start()
    lane.wait(
        lambda: "routing failed" in lane.cli("task", "show", "--board", BOARD, task_id).stdout,
        what="the routing failure on the shared board",
        timeout=240,
    )
    outputs = commands(lane, task_id)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    unreachable = f"postgresql://{user}:{BOARD_PASSWORD}@127.0.0.1:{closed_port()}/nowhere"
    lane.write_config(board_url=unreachable)
    for args in (("board", "ls"), ("doctor",), ("status",), ("config", "show")):
        done = lane.cli(*args)
        outputs[f"unreachable: {' '.join(args)}"] = done.stdout + done.stderr
    dump = subprocess.run(
        ["pg_dump", "--data-only", postgres_database], capture_output=True, check=False
    )
    if dump.returncode == 0:
        outputs["pg_dump"] = dump.stdout
    outputs.update(files_of(lane.root))
    assert leaks(outputs) == []


def test_doctor_probes_a_cli_with_the_workers_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = tmp_path / "codex"
    # Answers --version as codex does (doctor checks it is codex), then its environment.
    cli.write_text('#!/bin/sh\necho "codex-cli 0.0.0 $(env | cut -d= -f1 | sort | tr "\\n" " ")"\n')
    cli.chmod(0o755)
    monkeypatch.setenv("LANE_RUNNER_BOARD_URL", f"postgresql://u:{BOARD_PASSWORD}@db/x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cloud")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the other provider's")
    monkeypatch.setenv("OPENAI_API_KEY", "codex's own")
    cfg = config.load(tmp_path, {})
    version, _ = doctor_clis._probe("codex", cli, cfg, login.runs_as(cfg))
    names = version.detail.split(": ", 1)[1].rsplit(", run as", 1)[0].split()
    assert "OPENAI_API_KEY" in names and "PATH" in names
    assert not {"LANE_RUNNER_BOARD_URL", "AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY"} & set(names)
