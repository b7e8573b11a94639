"""``doctor``'s probes of the agent CLIs: each found, run as the attempts run it, its
parser given the runner's argv, logged in, and allowed to start as this user.

Every probe runs the CLI as the worker user, in the environment an attempt gets, in a
scratch directory of its own; the verdicts (``parser_verdict``, ``runs_verdict``,
``login_verdicts``, ``root_verdict``) are pure and tested directly.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lane_runner import config
from lane_runner.cli import login
from lane_runner.cli.checks import Check, Level
from lane_runner.config import Config
from lane_runner.errors import LaneRunnerError
from lane_runner.home import Home
from lane_runner.names import PROVIDERS
from lane_runner.providers import ADAPTERS, Login, ProviderRequest, RunsAs, adapter, user_ids
from lane_runner.providers.environment import worker_environment
from lane_runner.run import plan
from lane_runner.service.services import identity_problem, resolve_binaries

PROBE_TIMEOUT = 15.0
PROBE_MODEL = "lane-runner-doctor-probe"
#: The session a probe names to a CLI that is given one (claude ``--session-id``).
PROBE_SESSION = "00000000-0000-4000-8000-000000000000"
UNKNOWN_OPTION = (
    "unknown option",
    "unexpected argument",
    "unrecognized option",
    "unrecognized arguments",
)


def parser_verdict(provider: str, output: str) -> Check:
    """The CLI's answer to the runner's argv plus ``--help``: any unknown option is fatal."""
    name = f"{provider} argv"
    lowered = output.lower()
    for marker in UNKNOWN_OPTION:
        if marker in lowered:
            line = next(x for x in output.splitlines() if marker in x.lower())
            return Check(
                name,
                Level.FAIL,
                f"the CLI rejects the runner's argv: {line.strip()}",
                f"upgrade {provider} to a version that accepts these options",
            )
    return Check(name, Level.PASS, "the CLI's parser accepts the runner's argv")


def root_verdict(refusal: str | None, provider: str = "the CLI") -> Check:
    if refusal is None:
        return Check(
            f"{provider} as root", Level.PASS, "not root, a worker user, or a declared sandbox"
        )
    return Check(
        f"{provider} as root",
        Level.FAIL,
        f"{provider} lanes will refuse to start as root",
        "set worker_user to an unprivileged user (or IS_SANDBOX=1 on a throwaway host)",
    )


@dataclass(frozen=True)
class Answer:
    """What a probed command said, and its exit status (None: it did not run or end)."""

    said: str
    status: int | None


def _run(argv: list[str], cwd: Path, env: dict[str, str], runs: RunsAs) -> Answer:
    """``argv`` as the CLIs run: as ``runs.user`` (the worker user) when there is one."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT,
            **user_ids(runs.user),
        )
    except subprocess.TimeoutExpired:
        return Answer(f"no answer within {PROBE_TIMEOUT:g} s", None)
    except OSError as error:
        return Answer(f"cannot run: {error}", None)
    return Answer((done.stdout + "\n" + done.stderr).strip(), done.returncode)


def runs_verdict(provider: str, executable: Path, runs: RunsAs, answer: Answer) -> Check:
    """Whether the CLI (and the interpreter it starts) runs as the user the attempts run
    as: a worker user who cannot read a venv under root's home gets ``exec: ...:
    Permission denied`` (exit 126) on every attempt. Pure."""
    name = f"{provider} CLI"
    if answer.status == 0:
        first = answer.said.splitlines()[0] if answer.said else "?"
        return Check(name, Level.PASS, f"{executable}: {first}, run as {runs.who()}")
    said = answer.said.splitlines()[-1] if answer.said else f"exit status {answer.status}"
    if not runs.user:
        return Check(name, Level.FAIL, f"{executable} --version failed: {said}",
                     f"reinstall {provider} or point {provider}_bin at a working one")
    return Check(
        name,
        Level.FAIL,
        f"{executable} --version as {runs.who()} failed: {said}",
        f"every attempt runs it as {runs.user}: install the CLI and its interpreter where "
        f"{runs.user} can read and run them (not under a private home such as /root), or "
        f"open the directories on their path to it (chmod o+x); check with "
        f"{runs.sudo(f'{executable} --version')}",
    )


def runner_argv(
    provider: str, executable: Path, scratch: Path, sandbox: str | None = None
) -> list[str]:
    """What the runner would run for a fresh attempt (in the configured ``sandbox``
    mode), with a bogus model and ``--help``."""
    request = ProviderRequest(
        provider=provider,
        executable=executable,
        model=PROBE_MODEL,
        effort="low",
        prompt="",
        workspace=scratch,
        schema_path=scratch / "schema.json",
        settings_path=scratch / "settings.json",
        result_file=scratch / "result.json",
        session_id=PROBE_SESSION,
        resume=False,
        log_path=scratch / "log",
        env={},
        deadline=0.0,
        sandbox=sandbox,
    )
    argv = adapter(provider).argv(
        request, resume=False, result_file=request.result_file, schema="{}"
    )
    return [*argv, "--help"]


def cli_checks(cfg: Config, home: Home) -> list[Check]:
    try:
        binaries = resolve_binaries(cfg, home)
    except LaneRunnerError as error:
        fix = "fix " + " / ".join(f"{provider}_bin" for provider in PROVIDERS)
        return [Check("CLIs", Level.FAIL, str(error), fix)]
    found = [p for p in PROVIDERS if binaries.get(p) is not None]
    runs = login.runs_as(cfg)
    checks: list[Check] = []
    for provider in PROVIDERS:
        executable = binaries.get(provider)
        if executable is None:
            level = Level.WARN if found else Level.FAIL
            checks.append(
                Check(
                    f"{provider} CLI",
                    level,
                    "not found on PATH",
                    f"install {provider} or set {provider}_bin",
                )
            )
        elif cfg.simulate:
            checks.append(_version(provider, executable, cfg, runs))
        else:
            checks.extend(_probe(provider, executable, cfg, runs))
    if not cfg.simulate:
        pooled = bool(cfg.worker_users)
        for each in login.everyone(cfg):
            checks += login_verdicts(_logins(cfg, binaries, each), each.user if pooled else None)
    return checks


def _logins(cfg: Config, binaries: dict[str, Path | None], runs: RunsAs) -> dict[str, Login]:
    return {
        provider: login.check(adapter(provider), executable, cfg, runs)
        for provider, executable in binaries.items()
        if executable is not None
    }


def login_verdicts(logins: dict[str, Login], pool_user: str | None = None) -> list[Check]:
    """Each installed CLI's login (pure) as one user: a CLI not logged in fails when no
    other is (no lane could run as that user), and warns when another is (its lanes fall
    back to that one). ``pool_user``: which pool user, named in each check."""
    anyone = any(found.logged_in for found in logins.values())
    named = f" as {pool_user}" if pool_user else ""
    return [
        Check(f"{provider} login{named}", Level.PASS, found.detail)
        if found.logged_in
        else Check(
            f"{provider} login{named}", Level.WARN if anyone else Level.FAIL, found.detail,
            found.fix,
        )
        for provider, found in logins.items()
    ]


def _worker_env(provider: str, cfg: Config, runs: RunsAs) -> dict[str, str]:
    """The environment an attempt of ``provider`` gets, ``<provider>_env`` included."""
    return worker_environment(
        provider, runs.home if runs.user else None, config.cli_environment(cfg, provider),
        passes=cfg.worker_env,
    )


@contextlib.contextmanager
def _scratch(runs: RunsAs) -> Iterator[Path]:
    """A directory to probe in, the worker user's (as a worktree is) when there is one."""
    with tempfile.TemporaryDirectory(prefix="lane-runner-doctor-") as scratch:
        if runs.user:
            entry = pwd.getpwnam(runs.user)
            os.chown(scratch, entry.pw_uid, entry.pw_gid)
        yield Path(scratch)


def _version(provider: str, executable: Path, cfg: Config, runs: RunsAs) -> Check:
    """``--version`` run as the attempts run it: as the worker user, in its environment."""
    with _scratch(runs) as scratch:
        answer = _run([str(executable), "--version"], scratch, _worker_env(provider, cfg, runs),
                      runs)
    return runs_verdict(provider, executable, runs, answer)


def _probe(provider: str, executable: Path, cfg: Config, runs: RunsAs) -> list[Check]:
    """``--version`` and the runner's argv with ``--help``, as the user and in the
    environment a worker gets: the probe is a CLI like any other, and the runner's
    secrets stay out of it."""
    ran = _version(provider, executable, cfg, runs)
    if ran.level is not Level.PASS:
        return [ran]
    problem = identity_problem(provider, executable, runs.user)
    if problem is not None:
        return [Check(f"{provider} CLI", Level.FAIL, f"{executable} {problem}",
                      f"install {provider} or point {provider}_bin at it")]
    with _scratch(runs) as scratch:
        argv = runner_argv(provider, executable, scratch, config.cli_sandbox(cfg, provider))
        parsed = _run(argv, scratch, _worker_env(provider, cfg, runs), runs)
    return [ran, parser_verdict(provider, parsed.said)]


def root_checks(cfg: Config) -> list[Check]:
    """Each CLI that refuses root at all (claude): whether its lanes can start here, with
    the environment its attempts get (``<provider>_env`` may declare a sandbox)."""
    return [
        root_verdict(plan.root_refusal(cfg, cli), provider)
        for provider, cli in ADAPTERS.items()
        if cli.root_refusal(None, euid=0, environ={}) is not None
    ]
