"""Is each CLI logged in, as the user it will run as, and how to log it in (``doctor``).

A CLI that is not logged in fails every attempt (claude says "Not logged in"; codex,
offline or without credentials, reconnects until it gives up): ``doctor`` says so
before the daemon finds out task by task. The check runs as the runner would run
the CLI: as ``worker_user`` when root, with that user's ``HOME`` and the worker
environment (``providers/environment.py``), so a login made as another user (root's
``~/.codex``) does not count.

- codex: ``codex login status`` (exit 0: logged in, with ChatGPT or an API key).
- claude: an API key or token in the worker environment (``ANTHROPIC_API_KEY``,
  ``CLAUDE_CODE_OAUTH_TOKEN``, ``ANTHROPIC_AUTH_TOKEN``), or its credentials file
  (``.credentials.json`` in ``CLAUDE_CONFIG_DIR``, else ``~/.claude``).
"""

from __future__ import annotations

import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lane_runner.config import Config
from lane_runner.providers import user_ids
from lane_runner.providers.environment import worker_environment

CLAUDE_SECRETS = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")
CLAUDE_CREDENTIALS = ".credentials.json"
TIMEOUT = 15.0


@dataclass(frozen=True)
class Login:
    logged_in: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class RunsAs:
    """The user a CLI runs as (None: the runner's own) and the ``HOME`` it gets."""

    user: str | None
    home: Path

    @staticmethod
    def of(cfg: Config) -> RunsAs:
        if cfg.worker_user and os.geteuid() == 0:
            return RunsAs(cfg.worker_user, Path(pwd.getpwnam(cfg.worker_user).pw_dir))
        return RunsAs(None, Path.home())

    def sudo(self, command: str) -> str:
        """``command`` as that user would type it (``sudo -u USER -H`` in front when needed)."""
        return f"sudo -u {self.user} -H {command}" if self.user else command

    def who(self) -> str:
        return f"the worker user {self.user}" if self.user else "the user the daemon runs as"


def codex(executable: Path, cfg: Config) -> Login:
    runs = RunsAs.of(cfg)
    env = worker_environment("codex", runs.home, passes=cfg.worker_env)
    said, status = _run([str(executable), "login", "status"], runs, env)
    if status == 0:
        return Login(True, said)
    fix = (
        f"as {runs.who()}: {runs.sudo('codex login')} (or pipe an API key into "
        f"{runs.sudo('codex login --with-api-key')})"
    )
    return Login(False, f"not logged in as {runs.who()}: codex login status said: {said}", fix)


def claude(cfg: Config) -> Login:
    runs = RunsAs.of(cfg)
    env = worker_environment("claude", runs.home, passes=cfg.worker_env)
    secret = next((name for name in CLAUDE_SECRETS if env.get(name)), None)
    if secret is not None:
        return Login(True, f"{secret} reaches the claude workers")
    config_dir = Path(env.get("CLAUDE_CONFIG_DIR") or runs.home / ".claude")
    credentials = config_dir / CLAUDE_CREDENTIALS
    if credentials.is_file():
        return Login(True, f"credentials in {credentials}")
    fix = (
        f"as {runs.who()}: {runs.sudo('claude')}, then /login (or "
        f"{runs.sudo('claude setup-token')} and give the daemon CLAUDE_CODE_OAUTH_TOKEN, "
        "or ANTHROPIC_API_KEY: both reach claude workers)"
    )
    return Login(
        False,
        f"not logged in as {runs.who()}: no {', '.join(CLAUDE_SECRETS)} in the worker "
        f"environment and no {credentials}",
        fix,
    )


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
