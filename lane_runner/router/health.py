"""Provider health: what the runner last learned about each provider, on disk.

``provider-health/<provider>.json`` is written when a run fails for capacity,
authentication or a refused invocation (``misconfigured``: the CLI's own words on
why it would not run what the runner built) and cleared after a success. A usage
limit whose reset the CLI named (``until``) keeps the provider unavailable exactly
until then, however long that is: routing goes around it, and tasks only it could
serve wait for the reset (``limit_wait``) instead of cooling down blind. A fresh
"unavailable" record steers automatic routing away from that provider. An
authentication failure stays fresh much longer than a capacity one: nobody logs a
CLI back in within minutes. Files are replaced atomically, and a file that cannot
be read or trusted counts as "unknown" (never as a reason to crash or to exclude).
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TypeGuard

import orjson

from lane_runner import files
from lane_runner.names import AUTO_ASSIGNEE, PROVIDERS
from lane_runner.router.route import bounded

log = logging.getLogger(__name__)

FRESH_SECONDS = 5 * 60
AUTH_FRESH_SECONDS = 12 * 60 * 60
MAX_FILE_BYTES = 64 * 1024
MAX_HEALTH_REASON_CHARS = 500
FailureKind = Literal["capacity", "auth", "misconfigured"]
State = Literal["available", "unavailable"]


@dataclass(frozen=True)
class ProviderHealth:
    provider: str
    state: State
    authenticated: bool
    reason: str
    checked_at: float
    misconfigured: bool = False
    """The CLI refused the runner's own invocation; absent in older files (False)."""
    until: float | None = None
    """When the usage limit the CLI reported resets; None when it named no reset."""

    def fresh(self, now: float) -> bool:
        """Recent enough to act on; a stamp from the future is not trusted. Like a lost
        login, a misconfiguration is not fixed within minutes, so it stays fresh as long.
        A usage limit with a reset is fresh exactly until that reset."""
        if self.until is not None and self.state == "unavailable":
            return self.checked_at <= now < self.until
        quick = self.authenticated and not self.misconfigured
        window = FRESH_SECONDS if quick else AUTH_FRESH_SECONDS
        return 0 <= now - self.checked_at <= window

    @classmethod
    def from_document(
        cls, document: Any, provider: str | None = None, modified: float | None = None
    ) -> ProviderHealth:
        """Validate a decoded file; ValueError says what is wrong with it.

        The ancestor runner's files carry only ``state`` and, after an authentication
        failure, ``authenticated: false``; their provider is the file's name and their
        age the file's modification time. Passing ``provider`` and ``modified`` (the
        file's) lets such a file be read as it was meant: a missing ``authenticated``
        means authenticated, as the ancestor read it.
        """
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
        provider = document.get("provider", provider)
        state = document.get("state")
        authenticated = document.get("authenticated", True)
        reason = document.get("reason", "")
        checked_at = document.get("checked_at", modified)
        misconfigured = document.get("misconfigured", False)
        until = document.get("until")
        if provider not in PROVIDERS:
            raise ValueError(f"unknown provider {provider!r}")
        if state not in ("available", "unavailable"):
            raise ValueError(f"unknown state {state!r}")
        if not isinstance(authenticated, bool) or not isinstance(misconfigured, bool):
            raise ValueError("authenticated and misconfigured must be booleans")
        if not isinstance(reason, str):
            raise ValueError("reason must be a string")
        if not _number(checked_at):
            raise ValueError("checked_at must be a number")
        if until is not None and not _number(until):
            raise ValueError("until must be a number or null")
        return cls(provider, state, authenticated, reason, float(checked_at), misconfigured,
                   None if until is None else float(until))


def _number(value: Any) -> TypeGuard[int | float]:
    """A JSON number (a bool is no number, though Python's bool is an int)."""
    return not isinstance(value, bool) and isinstance(value, int | float)


def excluded_provider(healths: Iterable[ProviderHealth], now: float) -> tuple[str, str] | None:
    """The provider automatic routing must avoid, with the reason, or None.

    Only when exactly one provider is freshly unavailable: with both down the
    runner tries anyway, so the task records current errors rather than trusting
    snapshots.
    """
    down = [h for h in healths if h.state == "unavailable" and h.fresh(now)]
    if len(down) != 1:
        return None
    health = down[0]
    if health.until is not None:
        return health.provider, f"{limit_words(health)} ({health.reason})"
    minutes = max(0, int((now - health.checked_at) // 60))
    what = (
        "is misconfigured"
        if health.misconfigured
        else "is unavailable"
        if health.authenticated
        else "is not authenticated"
    )
    return health.provider, f"{what} ({health.reason}; checked {minutes} min ago)"


def exclusion_for(
    assignee: str, healths: Iterable[ProviderHealth], now: float
) -> tuple[str, str] | None:
    """``excluded_provider`` for ``cli-auto`` only: a manual lane names its provider.

    A manual lane still falls back after a real capacity failure of its own run;
    a snapshot of someone else's failure does not overrule the lane.
    """
    if assignee != AUTO_ASSIGNEE:
        return None
    return excluded_provider(healths, now)


def limit_words(health: ProviderHealth) -> str:
    """``usage limit until 20:00 UTC`` (with the day when it is not today's)."""
    assert health.until is not None
    moment = datetime.datetime.fromtimestamp(health.until, datetime.UTC)
    checked = datetime.datetime.fromtimestamp(health.checked_at, datetime.UTC)
    shown = moment.strftime("%H:%M UTC")
    if moment.date() != checked.date():
        shown = moment.strftime("%Y-%m-%d %H:%M UTC")
    return f"usage limit until {shown}"


def limit_wait(
    providers: Iterable[str], healths: Iterable[ProviderHealth], now: float
) -> tuple[float, str] | None:
    """When every provider in ``providers`` (those a task may use) is under a usage
    limit with a known reset: the earliest reset, and why the task waits for it.
    None when one of them may still be tried."""
    limited = _limited(healths, now)
    wanted = list(dict.fromkeys(providers))
    if not wanted or any(p not in limited for p in wanted):
        return None
    first = min((limited[p] for p in wanted), key=lambda h: h.until or 0.0)
    assert first.until is not None
    said = "; ".join(f"{p}: {limit_words(limited[p])}" for p in wanted)
    return first.until, f"waiting for a usage limit to reset ({said})"


def _limited(healths: Iterable[ProviderHealth], now: float) -> dict[str, ProviderHealth]:
    """The providers under a usage limit with a known reset, as their health says now."""
    return {h.provider: h for h in healths if h.until is not None and h.fresh(now)}


def health_file(directory: Path, provider: str) -> Path:
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}")
    return directory / f"{provider}.json"


def read_health(directory: Path, provider: str) -> ProviderHealth | None:
    """The recorded health of ``provider``; None when absent or untrustworthy (logged)."""
    health, problem = inspect(directory, provider)
    if problem is not None:
        log.warning("provider health %s treated as unknown: %s", problem.path, problem.why)
    return health


@dataclass(frozen=True)
class Problem:
    """Why a provider health file is not used (``doctor`` shows it)."""

    path: Path
    why: str


def inspect(directory: Path, provider: str) -> tuple[ProviderHealth | None, Problem | None]:
    """The recorded health of ``provider``, or why the file there cannot be trusted.

    Reads this runner's format and the ancestor runner's (see ``from_document``).
    """
    path = health_file(directory, provider)
    try:
        # A link or FIFO planted in the state directory is moved aside, never followed.
        data, status = files.read_entry(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None, None
    except OSError as error:
        return None, Problem(path, f"unreadable: {error.strerror}")
    try:
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
        health = ProviderHealth.from_document(orjson.loads(data), provider, status.st_mtime)
        if health.provider != provider:
            raise ValueError(f"records {health.provider}, not {provider}")
    except ValueError as error:  # orjson.JSONDecodeError is a ValueError
        return None, Problem(path, f"not valid: {error}")
    return health, None


def read_all(directory: Path) -> list[ProviderHealth]:
    """Every provider's trustworthy record (the input of ``excluded_provider``)."""
    return [h for h in (read_health(directory, p) for p in PROVIDERS) if h is not None]


def record_failure(
    directory: Path, provider: str, kind: FailureKind, reason: str, now: float | None = None
) -> ProviderHealth:
    """Mark ``provider`` unavailable after a capacity, authentication or invocation failure."""
    if kind not in ("capacity", "auth", "misconfigured"):
        raise ValueError(f"unknown failure kind {kind!r}")
    health = ProviderHealth(
        provider=provider,
        state="unavailable",
        authenticated=kind != "auth",
        reason=bounded(reason, MAX_HEALTH_REASON_CHARS),
        checked_at=time.time() if now is None else now,
        misconfigured=kind == "misconfigured",
    )
    _write(health_file(directory, provider), health)
    return health


def record_limit(
    directory: Path, provider: str, words: str, until: float, now: float
) -> ProviderHealth:
    """Mark ``provider`` unavailable until ``until``, the reset its CLI named (``words``)."""
    health = ProviderHealth(
        provider=provider,
        state="unavailable",
        authenticated=True,
        reason=bounded(words, MAX_HEALTH_REASON_CHARS),
        checked_at=now,
        until=until,
    )
    _write(health_file(directory, provider), health)
    return health


def record_success(directory: Path, provider: str, now: float | None = None) -> bool:
    """Clear an unavailable record after a successful run; True when one was cleared.

    Only an existing unavailable record is rewritten, so the common case (a
    healthy provider) costs one read and no fsync.
    """
    current = read_health(directory, provider)
    if current is None or current.state == "available":
        return False
    checked_at = time.time() if now is None else now
    _write(
        health_file(directory, provider),
        ProviderHealth(provider, "available", True, "a run succeeded", checked_at),
    )
    return True


def _write(path: Path, health: ProviderHealth) -> None:
    path.parent.mkdir(mode=files.PRIVATE_DIR, parents=True, exist_ok=True)
    files.write(path, orjson.dumps(asdict(health), option=orjson.OPT_INDENT_2))
