"""A command the runner starts for a task: as the worker user, in its own session, with a deadline.

git (``run/git.py``) and the operator's hooks (``run/hooks.py``) run this way: a
command that hangs (a hook waiting on the network, a git lock) is killed with
everything it started when its deadline passes, and the caller hears so.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from lane_runner.providers import user_ids


def home_of(user: str | None) -> Path | None:
    """The worker user's own home: its git configuration and credentials live there."""
    return Path(pwd.getpwnam(user).pw_dir) if user else None


class Timeout(Exception):
    """The command outlived its deadline and was killed, with its whole session."""

    def __init__(self, seconds: float, stdout: str, stderr: str) -> None:
        super().__init__(f"did not finish within {seconds:g} s: killed")
        self.seconds = seconds
        self.stdout = stdout
        self.stderr = stderr


def run(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    owner: str | None = None,
    stdin: str | None = None,
    output: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end or its deadline; ``Timeout`` when it was killed.

    ``stdin`` is fed to it (else it reads nothing); ``output`` takes its stdout and
    stderr together (a file, so a chatty command costs no memory), else both are
    returned as text.
    """
    streams: dict[str, object] = (
        {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        if output is None
        else {"stdout": output, "stderr": subprocess.STDOUT}
    )
    with subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        text=True,
        env=dict(env),
        start_new_session=True,
        **streams,  # type: ignore[call-overload]
        **user_ids(owner),
    ) as process:
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
                os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            raise Timeout(timeout, stdout or "", stderr or "") from None
    return subprocess.CompletedProcess(argv, process.returncode, stdout or "", stderr or "")
