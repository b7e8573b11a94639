"""Is each CLI logged in, as the user it will run as, and how to log it in (``doctor``).

A CLI that is not logged in fails every attempt (claude says "Not logged in"; codex,
offline or without credentials, reconnects until it gives up): ``doctor`` says so
before the daemon finds out task by task. The check runs as the runner would run
the CLI: as ``worker_user`` when root, with that user's ``HOME`` and the worker
environment (``providers/environment.py``), so a login made as another user (root's
``~/.codex``) does not count.

How each CLI says it is logged in is its adapter's ``login`` (``providers/``).
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from lane_runner.config import Config
from lane_runner.providers import Login, Provider, RunsAs, user_ids
from lane_runner.providers.environment import worker_environment

TIMEOUT = 15.0


def runs_as(cfg: Config) -> RunsAs:
    """Whom the CLIs run as under ``cfg``: the worker user when root, else the runner."""
    if cfg.worker_user and os.geteuid() == 0:
        return RunsAs(cfg.worker_user, Path(pwd.getpwnam(cfg.worker_user).pw_dir))
    return RunsAs(None, Path.home())


def check(cli: Provider, executable: Path, cfg: Config) -> Login:
    """Whether ``cli`` is logged in as the user and with the environment it will run with."""
    runs = runs_as(cfg)
    env = worker_environment(cli.name, runs.home, passes=cfg.worker_env)
    return cli.login(executable, runs, env, lambda argv: _run(argv, runs, env))


def _run(argv: list[str], runs: RunsAs, env: dict[str, str]) -> tuple[str, int | None]:
    """What the command said (its first line that is not a warning) and its exit status."""
    try:
        done = subprocess.run(
            argv, cwd=runs.home if runs.home.is_dir() else "/", env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
            timeout=TIMEOUT, **user_ids(runs.user),
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {TIMEOUT:g} s", None
    except OSError as error:
        return f"cannot run {argv[0]}: {error}", None
    lines = [
        line.strip() for line in (done.stdout + "\n" + done.stderr).splitlines()
        if line.strip() and not line.startswith("WARNING:")
    ]
    return (lines[0] if lines else f"exit status {done.returncode}"), done.returncode
