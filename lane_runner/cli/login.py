"""Is each CLI logged in, as the user it will run as, and how to log it in (``doctor``).

A CLI that is not logged in fails every attempt (claude says "Not logged in"; codex,
offline or without credentials, reconnects until it gives up): ``doctor`` says so
before the daemon finds out task by task. The check runs as the runner would run
the CLI: as ``worker_user`` when root (as each user of a pool, ``worker_users``), with
that user's ``HOME`` and the worker environment (``providers/environment.py``), so a
login made as another user (root's ``~/.codex``) does not count.

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
from lane_runner.service.workerpool import probe_user

TIMEOUT = 15.0


def runs_as(cfg: Config) -> RunsAs:
    """Whom ``doctor``'s probes run the CLIs as under ``cfg``: when root, the worker user
    (a pool's first without one, ``workerpool.probe_user``), else the runner."""
    user = probe_user(cfg)
    if user and os.geteuid() == 0:
        return _as(user)
    return RunsAs(None, Path.home())


def everyone(cfg: Config) -> tuple[RunsAs, ...]:
    """Every user a run's CLI may run as: under a pool each pool user, whose own home
    holds its own logins (a run leased a user its CLIs are not logged in as fails),
    else the one ``runs_as`` names."""
    if cfg.worker_users and os.geteuid() == 0:
        return tuple(_as(user) for user in cfg.worker_users)
    return (runs_as(cfg),)


def _as(user: str) -> RunsAs:
    return RunsAs(user, Path(pwd.getpwnam(user).pw_dir))


def check(cli: Provider, executable: Path, cfg: Config, runs: RunsAs) -> Login:
    """Whether ``cli`` is logged in as ``runs`` with the environment it will run with."""
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
