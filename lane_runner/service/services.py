"""What every run shares, built once per daemon (or ``recover``) from the configuration."""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemas
from journal import CommitResult, Journal, TerminalRecord
from lane_runner import config, files
from lane_runner.board import open_store
from lane_runner.board.base import BoardUnavailable, Store
from lane_runner.board.model import Outcome
from lane_runner.config import Config
from lane_runner.errors import UsageError
from lane_runner.home import REVIEW_WIRE_SCHEMA, WIRE_SCHEMA, Home
from lane_runner.names import PROVIDERS
from lane_runner.notifications import sender
from lane_runner.providers import ADAPTERS, adapter, user_ids, worker_environment
from lane_runner.router import Judge, Router, make_judge, make_router
from lane_runner.run import command
from lane_runner.service import identity, leftovers, workerpool
from lane_runner.service.activity import Activity
from lane_runner.service.breaker import Breaker
from lane_runner.service.resting import Resting
from lane_runner.service.slots import ProviderSlots
from lane_runner.service.workerpool import WorkerPool, probe_user
from lane_runner.usage.ledger import Ledger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tools:
    """The parts a run uses that a reload rebuilds: the router (with the static policy's
    models, efforts and preference), the judge, and the CLI of each provider.

    A run takes the ones in force at its claim (``Services.hold``) and keeps them to its
    end, as it keeps the configuration it was claimed under: no run routes, judges or
    starts a CLI by one configuration while its other settings are another's
    (docs/configuration.md, "What a reload changes").
    """

    router: Router
    judge: Judge
    binaries: Mapping[str, Path | None]


@dataclass
class Services:
    cfg: Config
    home: Home
    store: Store
    journal: Journal
    router: Router
    judge: Judge
    node: str
    binaries: dict[str, Path | None]
    schema_path: Path
    cancel: threading.Event = field(default_factory=threading.Event)
    activity: Activity = field(default_factory=Activity)
    resting: Resting = field(default_factory=Resting)
    slots: ProviderSlots = field(init=False)
    breaker: Breaker = field(init=False)
    ledger: Ledger = field(init=False)
    worker_pool: WorkerPool = field(init=False)
    """Who runs each run in flight (``worker_users``: fixed at start, a restart key)."""
    run_cancels: dict[int, threading.Event] = field(default_factory=dict)
    """One event per running run: set by ``task stop`` for that run, by shutdown for all."""
    _holds: dict[int, int] = field(default_factory=dict, init=False)
    """How many runs hold each router (by identity), from ``hold`` to ``let_go``."""
    _retired: dict[int, Router] = field(default_factory=dict, init=False)
    """Routers a reload replaced while runs held them: the last ``let_go`` closes each."""
    _tools_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.slots = ProviderSlots(self._caps, lambda: installed(self.binaries))
        self.breaker = Breaker(self.home.breaker_file)
        self.ledger = Ledger(self.home.usage)
        self.worker_pool = WorkerPool(self.cfg.worker_users)
        self._configure_breaker()

    def _configure_breaker(self) -> None:
        cfg = self.cfg
        self.breaker.configure(
            cfg.breaker_threshold, cfg.breaker_window, cfg.breaker_probe_interval
        )

    def tools(self) -> Tools:
        """The router, judge and CLIs in force now, not held: a reload may close this
        router (``recover``, the dry run and a test's own run use them at once)."""
        return Tools(self.router, self.judge, dict(self.binaries))

    def hold(self) -> Tools:
        """The router, judge and CLIs in force, for one run to its end (``let_go``): a
        reload meanwhile does not close the router the run holds."""
        with self._tools_lock:
            tools = self.tools()
            key = id(tools.router)
            self._holds[key] = self._holds.get(key, 0) + 1
            return tools

    def let_go(self, tools: Tools) -> None:
        """A run that ``hold`` gave ``tools`` ended; a router a reload replaced closes
        with the last run that held it."""
        key = id(tools.router)
        with self._tools_lock:
            left = self._holds.get(key, 0) - 1
            if left > 0:
                self._holds[key] = left
                return
            self._holds.pop(key, None)
            retired = self._retired.pop(key, None)
        if retired is not None:
            retired.close()

    def run_cancel(self, run_id: int) -> threading.Event:
        """The event that ends ``run_id``'s provider process; already set when shutting down."""
        event = threading.Event()
        self.run_cancels[run_id] = event
        if self.cancel.is_set():
            event.set()
        return event

    def forget_run(self, run_id: int) -> None:
        self.run_cancels.pop(run_id, None)

    def at_work(self, run_id: int) -> bool:
        """Whether a thread of this runner still carries ``run_id`` (its follow-ups too)."""
        return run_id in self.run_cancels

    def supervision(self) -> command.Supervision:
        """What every git command and hook of this runner is under (``run/command.py``):
        the shutdown ends it, and the markers let the next start find what it left."""
        return command.Supervision(self.cancel, leftovers.markers(self.node, self.home.root))

    def cancel_all(self) -> None:
        """Shutdown: end every run's provider process, git command and hook, and any
        routing call in flight."""
        self.cancel.set()
        for event in list(self.run_cancels.values()):
            event.set()

    def _caps(self) -> dict[str, int]:
        """The per-provider caps of the configuration in force (a reload changes them)."""
        return {p: config.cli_cap(self.cfg, p) for p in ADAPTERS}

    def commit(self, record: TerminalRecord) -> CommitResult:
        """The journal's board-commit callback: the exact-run completion on the record's board."""
        try:
            with self.resting.use(record.board):
                outcome = self.store.board(record.board).complete(
                    record.run_id,
                    record.result,
                    record.summary,
                    {**record.metadata, "journal_digest": record.digest},
                )
        except BoardUnavailable as error:
            log.warning("board %s unavailable; finalization waits: %s", record.board, error)
            return CommitResult.PENDING
        return CommitResult.COMMITTED if outcome.committed else CommitResult.STALE

    def holds_result(self, board: str, task_id: str, run_id: int) -> bool:
        """Whether the journal holds this run's accepted result, not yet on the board.

        A board journal directory that cannot be opened (a link planted in its place, a
        file) holds no result the runner may trust: False, so the run is handed back
        rather than left running forever; ``journal verify`` and ``doctor`` name it.
        """
        try:
            return self.journal.has_pending(board, task_id, run_id)
        except OSError as error:
            log.warning(
                "journal of board %s unreadable (%s); run %s has no result", board, error, run_id
            )
            return False

    def make_retryable(self, board: str, task_id: str, run_id: int, reason: str) -> None:
        """The journal's callback for an untrusted pending record: that exact run is retried."""
        try:
            with self.resting.use(board):
                self.store.board(board).reclaim(
                    run_id, f"untrusted journal entry: {reason}", Outcome.FAILED
                )
        except BoardUnavailable as error:
            log.warning("cannot make %s/%s run %s retryable now: %s", board, task_id, run_id, error)

    def reload(self, cfg: Config) -> None:
        """Take a reloaded configuration: the claims after it route, judge and run the
        CLIs by it; a running run keeps the ``Tools`` it holds to its end.

        Everything new is built before anything is swapped, so a configuration that
        cannot work (a CLI that is not there) raises and leaves the running one whole.
        The previous router closes now when no run holds it, else with the last run
        that does (``let_go``).
        """
        binaries = resolve_binaries(cfg, self.home)
        if cfg.notify:
            sender.require()
        router = make_router(cfg, self.cancel, installed(binaries))
        try:
            judge = make_judge(cfg, router)
        except Exception:
            router.close()
            raise
        with self._tools_lock:
            previous, self.router = self.router, router
            self.cfg, self.judge, self.binaries = cfg, judge, binaries
            held = id(previous) in self._holds
            if held:
                self._retired[id(previous)] = previous
        self._configure_breaker()
        if not held:
            previous.close()

    def close(self) -> None:
        self.router.close()
        with self._tools_lock:
            retired, self._retired = list(self._retired.values()), {}
        for router in retired:
            router.close()
        self.store.close()


def installed(binaries: dict[str, Path | None]) -> tuple[str, ...]:
    """The providers whose CLI was found, in the registry's order."""
    return tuple(provider for provider, path in binaries.items() if path is not None)


def resolve_binaries(cfg: Config, home: Home) -> dict[str, Path | None]:
    """The CLI per provider: the simulators when ``simulate``, else configured, else on PATH.

    A configured CLI that is missing, not executable or another program is refused
    (``UsageError``, exit 2) before the runner does anything with it.
    """
    if cfg.simulate:
        from lane_runner.providers.simulators import install

        return dict(install(home.root / "sim-bin"))
    found: dict[str, Path | None] = {}
    for provider, cli in ADAPTERS.items():
        configured = config.cli_binary(cfg, provider)
        if configured:
            path = shutil.which(configured)
            if path is None:
                raise UsageError(
                    f"{provider}_bin {configured!r} is missing or not executable; "
                    "fix it or unset it"
                )
            for user in _workers(cfg):
                refuse_replaceable(provider, Path(path), user)
            problem = identity_problem(provider, Path(path), probe_user(cfg))
            if problem is not None:
                raise UsageError(f"{provider}_bin {configured!r} {problem}; fix it or unset it")
            found[provider] = Path(path)
        else:
            on_path = shutil.which(cli.command)
            if on_path:
                for user in _workers(cfg):
                    refuse_replaceable(provider, Path(on_path), user)
            found[provider] = Path(on_path) if on_path else None
    return found


def _workers(cfg: Config) -> tuple[str | None, ...]:
    """Every user a CLI may run as: ``worker_user`` and each of the pool's; a CLI any of
    them could replace would have root, or another pool user's runs, run its code."""
    return tuple(dict.fromkeys((cfg.worker_user, *cfg.worker_users)))


def refuse_replaceable(provider: str, executable: Path, worker_user: str | None) -> None:
    """A CLI the worker user could replace (its own npm prefix, a self-updating CLI) is
    refused when the runner is root: the runner executes it (``--version`` here, the
    doctor's probes), and the next start would run the worker's code with root's rights."""
    if worker_user is None or os.geteuid() != 0:
        return
    writable = files.writable_by(executable, worker_user)
    if writable is not None:
        raise UsageError(
            f"the {provider} CLI {executable} can be replaced by worker_user {worker_user!r} "
            f"({writable} is writable by it): install the CLI where only root can write "
            f"(npm install -g as root, chown -R root: and chmod go-w {writable})"
        )


IDENTITY_TIMEOUT = 30.0


def identity_problem(
    provider: str, executable: Path, worker_user: str | None = None
) -> str | None:
    """Why ``executable`` is not the ``provider`` CLI, or None: its own ``--version``.

    Run as the worker user (never as root when one is configured: the CLI is the
    agent's program), with the workers' environment, no input and a deadline, from
    the root directory: a wrong program gets no workspace to act on.
    """
    try:
        done = subprocess.run(
            [str(executable), "--version"],
            cwd="/",
            env=worker_environment(provider, _home_of(worker_user)),
            **user_ids(worker_user),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=IDENTITY_TIMEOUT,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return f"did not answer --version within {IDENTITY_TIMEOUT:g} s"
    except OSError as error:
        return f"cannot be run: {error.strerror or error}"
    said = (done.stdout + done.stderr).strip()
    if done.returncode == 0 and adapter(provider).version_identity.search(said):
        return None
    first = said.splitlines()[0][:200] if said else f"nothing (exit status {done.returncode})"
    return f"is not the {provider} CLI: its --version said {first!r}"


def _home_of(user: str | None) -> Path | None:
    """The worker user's own home, where its CLIs keep their settings."""
    return Path(pwd.getpwnam(user).pw_dir) if user else None


def write_result_schema(home: Home) -> Path:
    """The wire schema as a file both CLIs read (codex ``--output-schema``, claude
    ``--json-schema``): the subset they accept, not the validation schema (see
    ``schemas/wire.py``)."""
    return _publish(home.root / WIRE_SCHEMA, schemas.load_bytes(WIRE_SCHEMA))


def write_review_schema(home: Home) -> Path:
    """The reviewer's wire schema (``review-result.wire.json``), as ``write_result_schema``."""
    return _publish(home.root / REVIEW_WIRE_SCHEMA, schemas.load_bytes(REVIEW_WIRE_SCHEMA))


def write_cli_settings(home: Home) -> None:
    """The settings file of each CLI that has one (claude's ``--settings``), as every run
    of that CLI gets it."""
    for cli in ADAPTERS.values():
        text = cli.settings_file()
        if text is not None:
            _publish(home.settings_file(cli.name), text.encode())


def _publish(path: Path, payload: bytes) -> Path:
    """``payload`` at ``path``, readable by a worker user (0644), replaced whole when it
    differs; a link or FIFO at the name is moved aside, never followed (``files``)."""
    try:
        if files.read(path, len(payload)) == payload:
            return path
    except FileNotFoundError:
        pass
    files.write(path, payload, mode=files.SHARED_FILE)
    return path


def check_worker_user(user: str | None) -> None:
    """Refuse to start with a worker user that does not exist (every run would fail)."""
    if user is None:
        return
    try:
        pwd.getpwnam(user)
    except KeyError:
        raise UsageError(
            f"worker_user {user!r} does not exist: create it (useradd --system {user}) "
            "or unset worker_user"
        ) from None


def preflight(cfg: Config) -> dict[str, Path | None] | None:
    """Refuse a configuration no run could work with, before anything is made or locked:
    a missing worker user, a CLI that is missing, not executable or another program.
    The CLIs found (None when simulating: the simulators are installed into the home)."""
    check_worker_user(cfg.worker_user)
    workerpool.check_users(cfg.worker_users)
    if cfg.notify:
        sender.require()  # notifications configured, Apprise missing: say so now
    return None if cfg.simulate else resolve_binaries(cfg, Home(cfg.home))


def build(
    cfg: Config, binaries: dict[str, Path | None] | None = None, **overrides: Any
) -> Services:
    """Everything a run shares; ``binaries`` from a ``preflight`` already made, if any."""
    if binaries is None:
        binaries = preflight(cfg)
    home = Home(cfg.home)
    home.ensure()
    write_cli_settings(home)
    write_review_schema(home)
    if probe_user(cfg):  # worker_user, or a pool: its users pass through the home
        home.admit_worker()
    cancel = overrides.pop("cancel", None) or threading.Event()
    # a shutdown ends a routing call at once
    router = make_router(cfg, cancel, PROVIDERS if binaries is None else installed(binaries))
    return Services(
        cfg=cfg,
        home=home,
        store=open_store(cfg),
        journal=Journal(home.lanes),
        router=router,
        judge=make_judge(cfg, router),
        node=identity.node_id(home),
        binaries=binaries if binaries is not None else resolve_binaries(cfg, home),
        schema_path=write_result_schema(home),
        cancel=cancel,
        **overrides,
    )
