"""Prometheus metrics, served on an opt-in port (config ``metrics_port``, loopback
unless ``metrics_address`` says otherwise), with the probes ``/healthz`` and
``/readyz`` beside them (``probes.py``).

One dedicated registry (never the process-global one, so tests and embedders
see only lane-runner's series), named objects below, and helpers so each call
site in the daemon and executor is one line. Counting costs a lock and an
addition: the metrics exist whether or not anybody serves them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from journal import RecoveryReport
from lane_runner.providers.model import Classification
from lane_runner.service.probes import Health, Verdict
from lane_runner.usage.record import Record

REGISTRY = CollectorRegistry()

CLAIMS = Counter("lane_runner_claims", "Runs claimed from a board", ["board"], registry=REGISTRY)
COMPLETIONS = Counter(
    "lane_runner_completions", "Runs whose result the board committed", ["board"], registry=REGISTRY
)
RUNS_ENDED = Counter(
    "lane_runner_runs_ended", "Runs ended, by the executor's last step", ["step"], registry=REGISTRY
)
BLOCKS = Counter("lane_runner_blocks", "Runs blocked, by block kind", ["kind"], registry=REGISTRY)
FALLBACKS = Counter(
    "lane_runner_fallbacks", "Fallbacks away from a provider", ["provider"], registry=REGISTRY
)
STALLS = Counter(
    "lane_runner_stalls",
    "Attempts killed for lack of meaningful events",
    ["provider"],
    registry=REGISTRY,
)
QUARANTINES = Counter(
    "lane_runner_quarantines",
    "Journal entries quarantined, by reason",
    ["reason"],
    registry=REGISTRY,
)
RECOVERIES = Counter(
    "lane_runner_recovery_actions",
    "Journal recovery actions, by action",
    ["action"],
    registry=REGISTRY,
)
COMMIT_SECONDS = Histogram(
    "lane_runner_journal_commit_seconds",
    "Finalizing one pending record: prepared evidence, board commit, settle",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
RUN_SECONDS = Histogram(
    "lane_runner_run_duration_seconds",
    "Claim to end of a run, by the executor's last step",
    ["step"],
    buckets=(1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200),
    registry=REGISTRY,
)
ACTIVE_RUNS = Gauge("lane_runner_active_runs", "Runs in flight", registry=REGISTRY)
PENDING_FINALIZATIONS = Gauge(
    "lane_runner_pending_finalizations",
    "Accepted results waiting for their board",
    registry=REGISTRY,
)

CLAIMS_HELD = Gauge(
    "lane_runner_claims_held",
    "1 while free slots are left unclaimed, by reason (paused, board_paused, budget, memory, "
    "caps)",
    ["reason"],
    registry=REGISTRY,
)
RUNNER_PAUSED = Gauge("lane_runner_paused", "1 while this runner is paused", registry=REGISTRY)
MEMORY_AVAILABLE = Gauge(
    "lane_runner_memory_available_bytes",
    "MemAvailable, or the cgroup's room when lower, at the last claim turn",
    registry=REGISTRY,
)
PROVIDER_RUNNING = Gauge(
    "lane_runner_provider_running", "Runs holding a slot, by provider", ["provider"],
    registry=REGISTRY,
)
PROVIDER_WAITING = Gauge(
    "lane_runner_provider_waiting",
    "Runs waiting for a slot of a provider at its cap",
    registry=REGISTRY,
)
STUCK_RUNS = Gauge(
    "lane_runner_stuck_runs",
    "Runs past stuck_warning_fraction of a limit, by kind (quiet, long)",
    ["kind"],
    registry=REGISTRY,
)
STUCK_WARNINGS = Counter(
    "lane_runner_stuck_warnings",
    "Stuck-run warnings commented on tasks, by kind",
    ["kind"],
    registry=REGISTRY,
)
STOPS = Counter(
    "lane_runner_stops", "Runs ended by an operator's task stop", ["board"], registry=REGISTRY
)
BREAKER_TRIPS = Counter(
    "lane_runner_breaker_trips",
    "Times the storm breaker marked a provider, workspace or board broken, by scope",
    ["scope"],
    registry=REGISTRY,
)
NOTIFICATIONS = Counter(
    "lane_runner_notifications",
    "Notification sends by board, kind and outcome (sent, failed: retried later, dropped: "
    "given up after notify_attempts)",
    ["board", "kind", "outcome"],
    registry=REGISTRY,
)
BROKEN = Gauge(
    "lane_runner_broken",
    "1 while the storm breaker marks a scope (provider:<name>, workspace:<board>:<path>, "
    "board:<slug>) broken",
    ["scope"],
    registry=REGISTRY,
)
DISK_FREE = Gauge(
    "lane_runner_disk_free_bytes",
    "Free space of the home's and each known workspace's filesystem, at the last claim turn",
    ["path"],
    registry=REGISTRY,
)
HOLD_REASONS = ("paused", "board_paused", "budget", "memory", "caps", "breaker", "disk")


def run_ended(board: str, step: str, seconds: float) -> None:
    RUNS_ENDED.labels(step).inc()
    RUN_SECONDS.labels(step).observe(seconds)
    if step == "committed":
        COMPLETIONS.labels(board).inc()


TOKENS = Counter(
    "lane_runner_tokens",
    "Tokens the CLIs reported spent, by provider, model and kind (the usage ledger's)",
    ["provider", "model", "kind"],
    registry=REGISTRY,
)
COST = Counter(
    "lane_runner_cost_usd",
    "Dollars spent as the CLI or the price table said, by provider and model",
    ["provider", "model"],
    registry=REGISTRY,
)


def spent(records: Iterable[Record]) -> None:
    """Count what new usage ledger records add."""
    for record in records:
        for kind, count in record.tokens.items():
            if count:
                TOKENS.labels(record.provider, record.model, kind).inc(count)
        if record.cost_usd:
            COST.labels(record.provider, record.model).inc(record.cost_usd)


def attempt_ended(provider: str, classification: Classification) -> None:
    if classification is Classification.STALLED:
        STALLS.labels(provider).inc()


def recovered(report: RecoveryReport) -> None:
    """Count what one journal recovery pass did, quarantines by their reason."""
    for event in report.events:
        RECOVERIES.labels(event.action).inc()
        if event.action == "quarantined":
            QUARANTINES.labels(event.reason or "untrusted").inc()


def load(active: int, pending: int) -> None:
    ACTIVE_RUNS.set(active)
    PENDING_FINALIZATIONS.set(pending)


def memory_available(available: int | None) -> None:
    """The memory a new run could use, as the claim guard just read it (unreadable: NaN,
    so a dashboard shows a gap rather than a 0 that reads as pressure)."""
    MEMORY_AVAILABLE.set(float("nan") if available is None else available)


def broken(scopes: set[str], known: set[str]) -> None:
    """1 for each scope the breaker marks broken, 0 for each it marked before (so a
    cleared scope reads 0, not a stale 1)."""
    for scope in known | scopes:
        BROKEN.labels(scope).set(1 if scope in scopes else 0)


def controls(
    *,
    paused: bool,
    hold: str | None,
    providers: dict[str, dict[str, int | None]],
    waiting: int,
    stuck: dict[str, int],
) -> None:
    """The operator controls' gauges, set every turn of the loop."""
    RUNNER_PAUSED.set(1 if paused else 0)
    for reason in HOLD_REASONS:
        CLAIMS_HELD.labels(reason).set(1 if hold == reason else 0)
    for provider, slot in providers.items():
        PROVIDER_RUNNING.labels(provider).set(slot["running"] or 0)
    PROVIDER_WAITING.set(waiting)
    for kind, count in stuck.items():
        STUCK_RUNS.labels(kind).set(count)


@dataclass
class Server:
    """The metrics endpoint; ``port`` is the bound one (useful when asked for 0 in tests)."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(port: int, address: str, health: Health) -> Server:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on ``address``:``port``.

    The numbers say what the runner holds, so the default address is loopback; a pod
    names its own (``0.0.0.0``) for the kubelet's probes and Prometheus to reach it.
    """
    probes = {"/healthz": health.live, "/readyz": health.ready}
    server = make_server(
        address,
        port,
        _with_probes(make_wsgi_app(REGISTRY), probes),
        _server_class(address),
        handler_class=_QuietHandler,
    )
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    return Server(server, thread)


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _with_probes(metrics_app: WsgiApp, probes: dict[str, Callable[[], Verdict]]) -> WsgiApp:
    """``metrics_app``, with each probe path answering 200 or 503 and its reason."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        probe = probes.get(environ.get("PATH_INFO", ""))
        if probe is None:
            return metrics_app(environ, start_response)
        verdict = probe()
        status = "200 OK" if verdict.ok else "503 Service Unavailable"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [f"{verdict.reason}\n".encode()]

    return app


def _server_class(address: str) -> type[WSGIServer]:
    """A threading server of the address's family (an IPv6 literal needs AF_INET6)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr: every probe and scrape would write a line there."""

    def log_message(self, format: str, *args: Any) -> None:
        return
