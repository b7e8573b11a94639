"""The work of one task without the runner: what the floor and the Huey peer both do.

Create the task's git worktree, run the simulated codex CLI with the argv the
runner gives it, read its answer. The floor then does the runner's durable
writes with nothing around them; Huey stores the answer in its own SQLite.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any, TypedDict

#: ``git worktree add`` on one repository must not run concurrently (the runner also locks).
_WORKTREE_LOCK = threading.Lock()


class TaskSpec(TypedDict):
    repo: str
    worktree: str
    branch: str
    codex: str
    schema: str
    result_file: str
    env: dict[str, str]
    prompt: str


def codex_argv(spec: TaskSpec) -> list[str]:
    """The simulated codex, invoked with the runner's argv shape (prompt on stdin)."""
    return [
        spec["codex"],
        "--dangerously-bypass-approvals-and-sandbox",
        "exec",
        "--json",
        "-m",
        "bench",
        "-c",
        'model_reasoning_effort="low"',
        "--output-schema",
        spec["schema"],
        "-o",
        spec["result_file"],
        "-C",
        spec["worktree"],
        "-",
    ]


def run_cli_task(spec: TaskSpec) -> dict[str, Any]:
    with _WORKTREE_LOCK:
        subprocess.run(
            ["git", "worktree", "add", "-q", "-b", spec["branch"], spec["worktree"]],
            cwd=spec["repo"],
            check=True,
            capture_output=True,
        )
    argv = codex_argv(spec)
    subprocess.run(
        argv,
        input=spec["prompt"].encode(),
        cwd=spec["worktree"],
        env=spec["env"],
        check=True,
        capture_output=True,
    )
    answer: dict[str, Any] = json.loads(Path(spec["result_file"]).read_text())
    return answer


def durable_write(directory: Path, name: str, data: bytes) -> None:
    """The bare atomic write: temp file, write, fsync, rename, directory fsync."""
    temporary = directory / f".{name}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, directory / name)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
