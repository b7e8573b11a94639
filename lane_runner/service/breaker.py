"""The storm breaker: the same failure on several tasks marks what they share as broken.

A broken environment (a missing tool, a failing hook, a bad credential in a file)
fails every task the same way. Each failure is counted against its own task's
budget, so without a breaker a runner spends every task's failures in minutes and
leaves them all ``gave_up``. Here each counted failure is filed under what it
implicates, its *scope* (``provider:<name>`` for a CLI attempt, ``board:<slug>``
for a hook, which is configured per board), with a *fingerprint*: the
classification and the error text with its varying parts (numbers, ids, paths)
taken out. ``threshold`` distinct tasks with one fingerprint in one scope within
``window`` seconds trip the breaker for that scope: no claims for it until an
operator clears it (``lane-runner health clear``) or a probe succeeds. Every
``probe_interval`` one run is let through as a probe; its success clears the trip,
its failure only waits for the next probe.

Trips live in ``<home>/breaker.json`` so ``status``, ``doctor`` and ``health clear``
in other processes see them and a restart keeps them; the failures that have not
tripped anything yet are kept in memory only (a restart forgets them, which is
safe: they are counted again). What each decision means is pure
(``fingerprint``, ``tripping``); ``Breaker`` keeps the state.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lane_runner import display, files

log = logging.getLogger(__name__)

MAX_BYTES = 256 * 1024
#: Failures kept in memory, whatever the window: a storm is seen long before this.
KEPT = 1000
#: Tasks named in a trip (enough to find them; the count says how many).
NAMED = 10

PROVIDER = "provider"
BOARD = "board"

#: The parts of an error text that differ between two tasks failing the same way.
_VARYING = re.compile(
    r"(?:/[^\s'\"`:,;()]+)+"  # a path: a task's worktree, a temporary file
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # a session id
    r"|\b[0-9a-f]{7,}\b"  # a commit, a hex id
    r"|\d+(?:\.\d+)?",  # a pid, a count, a time, a port
    re.I,
)
_SPACES = re.compile(r"\s+")


def scope(kind: str, name: str) -> str:
    """The scope a failure implicates: ``provider:codex``, ``board:work``."""
    return f"{kind}:{name}"


def fingerprint(classification: str, reason: str) -> str:
    """What two failures that are one failure have in common (pure): the classification
    and the first 200 characters of the error text, lower case, with paths, ids and
    numbers replaced by ``#`` and runs of white space by one space."""
    text = _VARYING.sub("#", reason[:2000].lower())
    return f"{classification}: {_SPACES.sub(' ', text).strip()[:200]}"


@dataclass(frozen=True)
class Failure:
    scope: str
    fingerprint: str
    task: str
    """``<board>/<task>``: distinct tasks are what count."""
    reason: str
    at: float


@dataclass
class Trip:
    scope: str
    fingerprint: str
    reason: str
    """One of the failures as it was worded (bounded), for the operator."""
    tasks: list[str]
    count: int
    tripped_at: float
    probe_at: float
    """When the next probe may start."""
    probes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, found: dict[str, Any]) -> Trip:
        return cls(
            scope=str(found["scope"]),
            fingerprint=str(found["fingerprint"]),
            reason=str(found["reason"]),
            tasks=[str(task) for task in found["tasks"]][:NAMED],
            count=int(found["count"]),
            tripped_at=float(found["tripped_at"]),
            probe_at=float(found["probe_at"]),
            probes=int(found.get("probes", 0)),
        )

    def describe(self) -> str:
        what = self.scope.replace(":", " ", 1)
        return (
            f"{what} is marked broken: {self.count} tasks failed the same way "
            f"({display.escaped(self.reason)}); 'lane-runner health clear' once it is fixed"
        )


def tripping(
    failures: Sequence[Failure], threshold: int, window: float, now: float
) -> list[tuple[str, str, list[Failure]]]:
    """Each (scope, fingerprint) with failures of at least ``threshold`` distinct tasks
    within ``window`` seconds before ``now``, with those failures (pure)."""
    if threshold <= 0:
        return []
    groups: dict[tuple[str, str], list[Failure]] = {}
    for failure in failures:
        if now - failure.at <= window:
            groups.setdefault((failure.scope, failure.fingerprint), []).append(failure)
    return [
        (key[0], key[1], found)
        for key, found in groups.items()
        if len({failure.task for failure in found}) >= threshold
    ]


@dataclass
class Breaker:
    """The trips of one home, and the failures that may yet trip one (thread-safe)."""

    path: Path
    threshold: int = 3
    window: float = 900.0
    probe_interval: float = 600.0
    _failures: list[Failure] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self, threshold: int, window: float, probe_interval: float) -> None:
        """Take new settings (a reload); trips in force stay until cleared."""
        with self._lock:
            self.threshold, self.window, self.probe_interval = threshold, window, probe_interval

    def failed(self, failure: Failure) -> Trip | None:
        """File one counted failure; the trip it caused, if it caused one."""
        with self._lock:
            self._failures = [
                f for f in self._failures if failure.at - f.at <= self.window
            ][-KEPT:] + [failure]
            trips = read(self.path)
            if failure.scope in trips:
                return None
            for found_scope, found_print, found in tripping(
                self._failures, self.threshold, self.window, failure.at
            ):
                if found_scope != failure.scope or found_print != failure.fingerprint:
                    continue
                tasks = sorted({f.task for f in found})
                trip = Trip(
                    scope=found_scope,
                    fingerprint=found_print,
                    reason=found[-1].reason[:500],
                    tasks=tasks[:NAMED],
                    count=len(tasks),
                    tripped_at=failure.at,
                    probe_at=failure.at + self.probe_interval,
                )
                trips[found_scope] = trip
                _write(self.path, trips)
                self._failures = [f for f in self._failures if f.scope != found_scope]
                return trip
            return None

    def trips(self) -> dict[str, Trip]:
        return read(self.path)

    def admits(self, where: str, now: float) -> bool:
        """Whether a run may use ``where`` now: it is not broken, or a probe is due (which
        this call starts: the next one is due a ``probe_interval`` later)."""
        with self._lock:
            trips = read(self.path)
            trip = trips.get(where)
            if trip is None:
                return True
            if now < trip.probe_at:
                return False
            trip.probe_at = now + self.probe_interval
            trip.probes += 1
            _write(self.path, trips)
            log.info("probing %s, marked broken since %s", where, trip.tripped_at)
            return True

    def blocked(self, where: str, now: float) -> Trip | None:
        """The trip that keeps ``where`` from being used now (none while a probe is due)."""
        trip = read(self.path).get(where)
        return trip if trip is not None and now < trip.probe_at else None

    def succeeded(self, where: str) -> bool:
        """``where`` worked (a probe, or a run begun before the trip): clear its trip."""
        with self._lock:
            self._failures = [f for f in self._failures if f.scope != where]
            trips = read(self.path)
            if trips.pop(where, None) is None:
                return False
            _write(self.path, trips)
            log.warning("%s works again: its breaker is cleared", where)
            return True


def read(path: Path) -> dict[str, Trip]:
    """The trips in force, by scope. A file that cannot be parsed trips nothing: it is
    logged and the breaker starts again (failures trip it again if they go on)."""
    try:
        data = files.read(path, MAX_BYTES)
    except FileNotFoundError:
        return {}
    except OSError as error:
        log.warning("breaker file %s unreadable (%s); no trips in force", path, error)
        return {}
    try:
        found = orjson.loads(data[:MAX_BYTES])
        return {str(k): Trip.from_dict(v) for k, v in found["trips"].items()}
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
        log.warning("breaker file %s unparsable (%s); no trips in force", path, error)
        return {}


def clear(path: Path, where: str | None = None) -> list[Trip]:
    """Lift the trip of ``where`` (every trip when None); the trips lifted. An operator's
    ``lane-runner health clear``: a daemon sees it at its next turn."""
    trips = read(path)
    lifted = [trip for name, trip in trips.items() if where is None or name == where]
    if lifted:
        _write(path, {name: t for name, t in trips.items() if t not in lifted})
    return lifted


def _write(path: Path, trips: dict[str, Trip]) -> None:
    if not trips:
        path.unlink(missing_ok=True)
        return
    files.write(path, orjson.dumps({"trips": {k: t.to_dict() for k, t in trips.items()}}))
