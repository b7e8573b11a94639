"""``doctor``'s checks: is this machine fit to run lane-runner? Each says pass, warn or fail.

Every check is a short function returning a ``Check`` with a one-line fix; the
verdicts that need no I/O (levels, modes, disk, parser output) are pure and
tested directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from journal import LinuxFS
from lane_runner import config, redact
from lane_runner.board import hermes_home, open_store
from lane_runner.board.base import BoardError
from lane_runner.board.hermes import HermesStore
from lane_runner.cli import login
from lane_runner.config import Config
from lane_runner.errors import LaneRunnerError
from lane_runner.home import Home
from lane_runner.names import PROVIDERS
from lane_runner.providers import (
    ADAPTERS,
    Login,
    ProviderRequest,
    RunsAs,
    adapter,
    sandbox,
    user_ids,
)
from lane_runner.providers.environment import worker_environment
from lane_runner.router import RoutingError, health, make_router
from lane_runner.router.health import ProviderHealth
from lane_runner.run import keeping, plan
from lane_runner.service import breaker, diskuse, identity
from lane_runner.service.notify import Notifier
from lane_runner.service.services import identity_problem, resolve_binaries

PROBE_TIMEOUT = 15.0
GATEWAY_TIMEOUT = 3.0
MIN_FREE_BYTES = 1 << 30
PROBE_MODEL = "lane-runner-doctor-probe"
#: The session a probe names to a CLI that is given one (claude ``--session-id``).
PROBE_SESSION = "00000000-0000-4000-8000-000000000000"
UNKNOWN_OPTION = (
    "unknown option",
    "unexpected argument",
    "unrecognized option",
    "unrecognized arguments",
)


class Level(enum.IntEnum):
    PASS = 0
    WARN = 1
    FAIL = 2

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    fix: str = ""


def worst(checks: list[Check]) -> Level:
    return max((check.level for check in checks), default=Level.PASS)


def exit_status(checks: list[Check], strict: bool) -> int:
    """0 unless a check failed (or, with ``strict``, warned): then 1."""
    bar = Level.WARN if strict else Level.FAIL
    return 1 if worst(checks) >= bar else 0


# -- pure verdicts ---------------------------------------------------------------


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


def mode_verdict(
    path: Path, st: os.stat_result, euid: int, worker_user: str | None = None
) -> Check:
    """The home is private; with a worker user, others may also pass through (0711)."""
    name = f"home {path}"
    if st.st_uid != euid:
        return Check(
            name,
            Level.FAIL,
            f"owned by uid {st.st_uid}, not this user ({euid})",
            f"chown -R {euid} {path}",
        )
    wanted = 0o711 if worker_user else 0o700
    if stat.S_IMODE(st.st_mode) & 0o077 & ~wanted:
        return Check(
            name,
            Level.WARN,
            f"mode {stat.S_IMODE(st.st_mode):04o} lets others in",
            f"chmod {wanted:04o} {path}",
        )
    return Check(name, Level.PASS, f"owned by this user, mode {wanted:04o} or closer")


def modes_verdict(wider: list[tuple[Path, int, int]]) -> Check:
    """The home's state private: directories 0700, files 0600 (see ``Home.wider_modes``)."""
    if not wider:
        return Check("private modes", Level.PASS, "the home's state is private to this user")
    shown = ", ".join(f"{path} {mode:04o} (want {wanted:04o})" for path, mode, wanted in wider[:5])
    more = f" and {len(wider) - 5} more" if len(wider) > 5 else ""
    return Check("private modes", Level.WARN, f"{shown}{more}", "lane-runner doctor --fix")


def narrow_modes(home: Home, worker_user: str | None) -> list[str]:
    """``doctor --fix``: each wider mode narrowed to what it should be; what was done."""
    done = []
    for path, mode, wanted in home.wider_modes(worker_user):
        try:
            os.chmod(path, mode & wanted, follow_symlinks=False)
        except OSError as error:
            done.append(f"cannot narrow {path}: {error.strerror}")
            continue
        done.append(f"{path}: {mode:04o} -> {mode & wanted:04o}")
    return done


def disk_verdict(path: Path, free: int) -> Check:
    detail = f"{free / (1 << 30):.1f} GiB free"
    if free < MIN_FREE_BYTES // 4:
        return Check("free disk", Level.FAIL, detail, f"free space on the filesystem of {path}")
    if free < MIN_FREE_BYTES:
        return Check("free disk", Level.WARN, detail, f"free space on the filesystem of {path}")
    return Check("free disk", Level.PASS, detail)


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


def health_verdict(record: ProviderHealth | None, now: float) -> Check | None:
    """A provider whose CLI refused the runner's invocation: lanes cannot run it until the
    configuration or the CLI is fixed, so doctor fails (None for anything else)."""
    if record is None or not record.misconfigured:
        return None
    if record.state != "unavailable" or not record.fresh(now):
        return None
    return Check(
        f"{record.provider} health",
        Level.FAIL,
        f"the CLI refused the runner's invocation: {record.reason}",
        f"install the {record.provider} version the README names, or fix what it names; "
        "the record clears after the next successful run",
    )


# -- checks with effects -----------------------------------------------------------


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
        return [Check("CLIs", Level.FAIL, str(error), "fix codex_bin / claude_bin")]
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
        checks += login_verdicts(_logins(cfg, binaries))
    return checks


def _logins(cfg: Config, binaries: dict[str, Path | None]) -> dict[str, Login]:
    return {
        provider: login.check(adapter(provider), executable, cfg)
        for provider, executable in binaries.items()
        if executable is not None
    }


def login_verdicts(logins: dict[str, Login]) -> list[Check]:
    """Each installed CLI's login (pure): a CLI not logged in fails when no other is (no
    lane could run), and warns when another is (its lanes fall back to that one)."""
    anyone = any(found.logged_in for found in logins.values())
    return [
        Check(f"{provider} login", Level.PASS, found.detail)
        if found.logged_in
        else Check(
            f"{provider} login", Level.WARN if anyone else Level.FAIL, found.detail, found.fix
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


def home_checks(cfg: Config, home: Home) -> list[Check]:
    try:
        st = os.stat(home.root)
    except FileNotFoundError:
        return [
            Check(
                f"home {home.root}",
                Level.WARN,
                "does not exist yet",
                "run 'lane-runner board create NAME' or start the daemon once",
            )
        ]
    checks = [mode_verdict(home.root, st, os.geteuid(), cfg.worker_user)]
    checks.append(modes_verdict(home.wider_modes(cfg.worker_user)))
    checks += [
        Check(
            "home directories",
            Level.FAIL,
            problem,
            "move it aside; lane-runner recreates the directory (it never follows a link)",
        )
        for problem in home.unsafe_directories()
    ]
    checks.append(identity_verdict(identity.problem(home)))
    checks.append(disk_verdict(home.root, shutil.disk_usage(home.root).free))
    checks.append(Check("disk use", Level.PASS, diskuse.describe(diskuse.measure(home))))
    checks.append(_noreplace(home))
    checks += kept_worktrees_verdict(keeping.recorded(home))
    return checks


def kept_worktrees_verdict(kept: list[keeping.Kept]) -> list[Check]:
    """The done tasks' worktrees cleanup keeps past retention_days (``run/keeping.py``)."""
    if not kept:
        return []
    named = "; ".join(f"{entry.task} at {entry.worktree}: {entry.why}" for entry in kept)
    return [Check(
        "kept worktrees", Level.WARN,
        f"{len(kept)} done task(s)' worktree(s) kept past retention_days, as removing them "
        f"would lose work: {named}",
        "commit what is worth keeping on a branch (or discard it) in each; the next "
        "cleanup removes them then",
    )]


def identity_verdict(problem: str | None) -> Check:
    """Whether this home is the one its node id was made for (``service/identity.py``):
    the daemon and ``recover`` refuse a copied or moved home until told which it is."""
    if problem is None:
        return Check("home identity", Level.PASS, "the node id was made for this home")
    return Check(
        "home identity",
        Level.FAIL,
        problem,
        "'lane-runner recover --adopt' if it replaces that home, '--new-node' if it is a "
        "runner of its own",
    )


def _noreplace(home: Home) -> Check:
    fs = LinuxFS()
    try:
        fd = fs.open_root(home.lanes)
    except OSError as error:
        return Check(
            "rename-no-replace",
            Level.WARN,
            f"cannot open {home.lanes}: {error}",
            "start the daemon once to create it",
        )
    try:
        method = fs.noreplace_method(fd)
        created = _record_creation(fs, fd)
    finally:
        fs.close(fd)
    return noreplace_verdict(method, created)


def noreplace_verdict(method: str, created: str) -> Check:
    """How the journal publishes a record without replacing one. The fallback (link, then
    unlink) gives the same guarantee, so it passes: a note, not a warning. Pure."""
    if method == "renameat2":
        return Check("rename-no-replace", Level.PASS, f"renameat2(RENAME_NOREPLACE); {created}")
    return Check(
        "rename-no-replace",
        Level.PASS,
        f"link + unlink, the same guarantee as renameat2(RENAME_NOREPLACE), which this "
        f"filesystem lacks (one more syscall per record); {created}",
    )


def _record_creation(fs: LinuxFS, fd: int) -> str:
    try:
        unnamed = fs.create_unnamed(fd)  # never linked: it vanishes when closed
    except OSError as error:
        return f"how new records are created is unknown ({error.strerror})"
    if unnamed is None:
        return "new records are written under temporary names"
    fs.close(unnamed)
    return "new records are written unnamed (O_TMPFILE) and linked into place"


def board_checks(cfg: Config) -> list[Check]:
    try:
        store = open_store(cfg)
    except LaneRunnerError as error:
        return [Check("board store", Level.FAIL, str(error), "fix board_url")]
    checks = hermes_checks(store) if isinstance(store, HermesStore) else []
    try:
        for slug in store.board_slugs():
            try:
                store.board(slug).counts()
            except BoardError as error:
                checks.append(
                    Check(
                        f"board {slug}",
                        Level.FAIL,
                        str(error),
                        "restore the board file or move it aside",
                    )
                )
            else:
                checks.append(Check(f"board {slug}", Level.PASS, "opens and reads"))
    finally:
        store.close()
    return checks


def hermes_checks(store: HermesStore) -> list[Check]:
    """The Hermes home and release (opening the store checked both), and lane-named profiles."""
    checks = [Check("hermes home", Level.PASS, store.facts())]
    clashing = hermes_home.lane_profiles(store.home)
    if clashing:
        checks.append(
            Check(
                "hermes profiles",
                Level.WARN,
                f"Hermes profiles named like lanes: {', '.join(clashing)}; Hermes's own "
                "dispatcher would spawn them for those tasks too",
                "rename those Hermes profiles (lane-runner serves the cli-* assignees)",
            )
        )
    return checks


def gateway_checks(cfg: Config) -> list[Check]:
    """Where each CLI sends its model requests under ``codex_config`` and
    ``<provider>_env`` (with what the workers inherit): the settings complete, and the
    endpoint accepting connections. Nothing to say for a CLI left at its vendor's API."""
    checks: list[Check] = []
    for provider, cli in ADAPTERS.items():
        home = Path(pwd.getpwnam(cfg.worker_user).pw_dir) if cfg.worker_user else None
        env = worker_environment(
            provider, home, config.cli_environment(cfg, provider), passes=cfg.worker_env
        )
        base_url, problems = cli.gateway(config.cli_overrides(cfg, provider), env)
        name = f"{provider} gateway"
        fix = (f"fix {provider}_config / {provider}_env "
               "(docs/configuration.md, 'Your own model gateway')")
        checks += [Check(name, Level.FAIL, problem, fix) for problem in problems]
        if base_url is None or problems:
            continue
        refused = _connect(base_url)
        if refused is None:
            checks.append(Check(name, Level.PASS, f"{base_url} accepts connections"))
        else:
            checks.append(Check(name, Level.WARN, f"{base_url}: {refused}",
                                "start the gateway, or check the URL and this host's network"))
    return checks


def _connect(url: str) -> str | None:
    """Why a TCP connection to ``url``'s host and port fails, or None when it opens."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=GATEWAY_TIMEOUT):
            return None
    except OSError as error:
        return f"cannot connect ({error.strerror or error})"


def router_check(cfg: Config) -> list[Check]:
    if not cfg.router_url:
        return []
    router = make_router(cfg)
    try:
        route = router.route("lane-runner doctor: test route", "cli-auto", None, None)
    except RoutingError as error:
        fix = f"check router_url {redact.url(cfg.router_url)}"
        return [Check("router", Level.FAIL, str(error), fix)]
    finally:
        router.close()
    return [Check("router", Level.PASS, f"test route: {route.describe()}")]


def health_checks(home: Home, now: float) -> list[Check]:
    """Each provider health file present: what it says, or why it is ignored.

    Files in the ancestor runner's format (``state`` and ``authenticated`` only, aged
    by their modification time) are read as well; anything else is said here,
    because the daemon only logs it and routes as if the provider's health were unknown.
    """
    checks = []
    for provider in PROVIDERS:
        record, problem = health.inspect(home.provider_health, provider)
        if problem is not None:
            checks.append(
                Check(
                    f"{provider} health",
                    Level.WARN,
                    f"{problem.path} is ignored: {problem.why}",
                    'remove it, or write {"state": "available" or "unavailable", '
                    '"authenticated": true or false}',
                )
            )
        elif (refused := health_verdict(record, now)) is not None:
            checks.append(refused)
        elif record is not None:
            minutes = int((now - record.checked_at) // 60)
            avoided = record.state == "unavailable" and record.fresh(now)
            checks.append(
                Check(
                    f"{provider} health",
                    Level.PASS,
                    f"{record.state} ({record.reason or 'no reason given'}; "
                    f"checked {minutes} min ago"
                    + ("; cli-auto routing avoids it)" if avoided else ")"),
                )
            )
    return checks


def breaker_checks(home: Home) -> list[Check]:
    """Each scope the storm breaker marks broken: claims stop for it until it is cleared
    or a probe succeeds (``service/breaker.py``), so doctor fails and says why."""
    return [
        Check(
            f"breaker {trip.scope}",
            Level.FAIL,
            f"{trip.count} tasks failed the same way ({trip.reason}); claims for it stop",
            f"fix the cause, then 'lane-runner health clear {trip.scope}' (or wait for a "
            "probe to succeed)",
        )
        for trip in breaker.read(home.breaker_file).values()
    ]


def notify_check(notifier: Notifier) -> list[Check]:
    if not notifier.enabled:
        return []
    if notifier.send("STATUS=lane-runner doctor"):
        return [Check("systemd notify", Level.PASS, "NOTIFY_SOCKET accepts messages")]
    return [
        Check(
            "systemd notify",
            Level.FAIL,
            "NOTIFY_SOCKET does not accept messages",
            "check the unit's NotifyAccess= and the socket's permissions",
        )
    ]


def hide_secrets(check: Check) -> Check:
    """``check`` with every URL in its words redacted: a driver or HTTP client error may
    quote ``board_url`` or ``router_url`` whole, credentials included."""
    return dataclasses.replace(check, detail=redact.text(check.detail), fix=redact.text(check.fix))


def root_checks(cfg: Config) -> list[Check]:
    """Each CLI that refuses root at all (claude): whether its lanes can start here, with
    the environment its attempts get (``<provider>_env`` may declare a sandbox)."""
    return [
        root_verdict(plan.root_refusal(cfg, cli), provider)
        for provider, cli in ADAPTERS.items()
        if cli.root_refusal(None, euid=0, environ={}) is not None
    ]


def isolation_verdict(level: str, why: str, refused: str | None, simulate: bool) -> Check:
    """Which isolation contains each attempt, and why (docs/security.md): a sandbox
    asked for and unavailable fails (``refused``: no attempt starts), less than a
    sandbox warns."""
    name, said = "isolation", f"{level}: {why}"
    if simulate:
        return Check(name, Level.PASS, f"{said}; the simulated CLIs run as they are")
    install = "install bubblewrap and allow unprivileged user namespaces (docs/security.md)"
    if refused is not None:
        return Check(name, Level.FAIL, f"{refused}: no attempt starts",
                     f"{install}, or set isolation = user")
    if level == sandbox.SANDBOX:
        return Check(name, Level.PASS, f"{said}; each attempt has its own mounts, processes "
                     "and network, egress only to the allow-list")
    reach = ("each task can read the others' worktrees and reach the services on this "
             "host's network (the board included)")
    return Check(name, Level.WARN, f"{said}; {reach}", install)


def run_all(cfg: Config) -> list[Check]:
    home = Home(cfg.home)
    checks = [
        *cli_checks(cfg, home),
        isolation_verdict(*config.isolation(cfg), plan.unsandboxable(cfg), cfg.simulate),
        *root_checks(cfg),
        *home_checks(cfg, home),
        *board_checks(cfg),
        *gateway_checks(cfg),
        *router_check(cfg),
        *health_checks(home, time.time()),
        *breaker_checks(home),
        *notify_check(Notifier()),
    ]
    return [hide_secrets(check) for check in checks]
