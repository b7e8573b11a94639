"""``doctor``'s checks: is this machine fit to run lane-runner? Each says pass, warn or fail.

Every check is a short function returning a ``Check`` (``checks.py``) with a one-line
fix; the verdicts that need no I/O (modes, disk, identity, provider health) are pure
and tested directly. The agent CLIs' probes are ``doctor_clis.py``'s.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import time
from pathlib import Path
from urllib.parse import urlsplit

from journal import LinuxFS
from lane_runner import config, redact
from lane_runner.board import open_store
from lane_runner.board.base import BoardError
from lane_runner.board.hermes import home as hermes_home
from lane_runner.board.hermes.store import HermesStore
from lane_runner.cli.checks import Check, Level, hide_secrets
from lane_runner.cli.doctor_clis import cli_checks, root_checks
from lane_runner.cli.doctor_people import people_checks
from lane_runner.config import Config
from lane_runner.errors import LaneRunnerError, UsageError
from lane_runner.home import Home
from lane_runner.names import PROVIDERS
from lane_runner.providers import ADAPTERS, sandbox
from lane_runner.providers.environment import worker_environment
from lane_runner.router import RoutingError, health, make_router
from lane_runner.router.health import ProviderHealth
from lane_runner.run import git, keeping, plan
from lane_runner.service import breaker, diskuse, identity, workerpool
from lane_runner.service.notify import Notifier
from lane_runner.service.workerpool import probe_user

GATEWAY_TIMEOUT = 3.0
#: The first git that runs hooks a repository's configuration defines (``hook.<name>.command``
#: with ``hook.<name>.event``): ``core.hooksPath`` does not reach them (docs/security.md).
CONFIGURED_HOOKS = (2, 54)
MIN_FREE_BYTES = 1 << 30


# -- pure verdicts ---------------------------------------------------------------


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


def git_verdict(said: str, why: str = "") -> Check:
    """What ``git --version`` printed; ``why`` it printed nothing else. Pure."""
    words = said.split()
    if len(words) < 3 or words[:2] != ["git", "version"]:
        return Check("git", Level.FAIL, f"git did not run from {git.PATH}: {why or said}",
                     "install git (every task's workspace is a git clone)")
    parts = tuple(int(part) for part in words[2].split(".")[:2] if part.isdigit())
    if parts >= CONFIGURED_HOOKS:
        return Check(
            "git", Level.WARN,
            f"git {words[2]} runs hooks a repository's configuration defines "
            "(hook.<name>.command), which the runner's git cannot switch off: a task can "
            "plant one that runs in the runner's git of the next task",
            "run the runner with a git before 2.54 (docs/security.md, What the runner's git "
            "never runs)",
        )
    return Check("git", Level.PASS, f"git {words[2]}")


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
    passes = probe_user(cfg)  # worker_user, or a pool's first: who passes the home
    checks = [mode_verdict(home.root, st, os.geteuid(), passes)]
    checks.append(modes_verdict(home.wider_modes(passes)))
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


def pool_checks(cfg: Config) -> list[Check]:
    """The pool of worker users (``worker_users``), when there is one: every user must
    exist and be unprivileged; what it keeps apart and what stays shared."""
    if not cfg.worker_users:
        return []
    named = ", ".join(cfg.worker_users)
    try:
        workerpool.check_users(cfg.worker_users)
    except UsageError as error:
        return [Check("worker pool", Level.FAIL, str(error),
                      "create the user (useradd --system --create-home NAME) or remove it")]
    return [Check(
        "worker pool", Level.PASS,
        f"{len(cfg.worker_users)} users ({named}): at most {len(cfg.worker_users)} runs at "
        "once, each as a user of its own, its worktree and result outbox that user's alone; "
        "the repository and the host's network stay shared (docs/security.md)",
    )]


def git_check() -> Check:
    """The git the runner's git calls find (``run/git.py``'s PATH)."""
    try:
        said = git.run("--version", cwd=Path("/"), timeout=GATEWAY_TIMEOUT)
    except OSError as error:  # nothing could be started: the verdict says why
        return git_verdict("", str(error))
    return git_verdict(said.stdout, said.stderr.strip() or f"exit status {said.returncode}")


def run_all(cfg: Config) -> list[Check]:
    home = Home(cfg.home)
    checks = [
        git_check(),
        *cli_checks(cfg, home),
        isolation_verdict(*config.isolation(cfg), plan.unsandboxable(cfg), cfg.simulate),
        *pool_checks(cfg),
        *root_checks(cfg),
        *home_checks(cfg, home),
        *board_checks(cfg),
        *gateway_checks(cfg),
        *people_checks(cfg),
        *router_check(cfg),
        *health_checks(home, time.time()),
        *breaker_checks(home),
        *notify_check(Notifier()),
    ]
    return [hide_secrets(check) for check in checks]
