"""The storm breaker: the same failure on several tasks marks what they share as broken.

A broken environment (a missing tool, a failing hook, a bad credential in a file, a
repository gone from its disk) fails every task the same way. Each failure is
counted against its own task's budget (or blocks it), so without a breaker a runner
spends every task's failures in minutes and leaves them all ``gave_up`` or blocked.
Here each such failure is filed under what it implicates, its *scope*:
``provider:<name>`` for a CLI attempt, ``workspace:<board>:<workspace>`` for a hook or
a workspace that cannot be prepared (a task's repository, or its folder of one), and
``board:<slug>`` for a hook of a task with no workspace. A workspace's failures also
count towards its board (the *wider* scope): the hooks are configured per board, so
one failure spread over several workspaces implicates the board. Each has a
*fingerprint*: the classification and the error text with its varying parts
(numbers, ids, paths) taken out. ``threshold`` distinct tasks with one fingerprint in
one scope within ``window`` seconds trip the breaker for that scope (the narrower
first): no claims for it (for a workspace, the board's claims pass over its tasks)
until an operator clears it (``lane-runner health clear``) or a probe succeeds.
Every ``probe_interval`` one run is let through as a probe; its success clears the
trip, its failure only waits for the next probe.

Trips live in ``<home>/breaker.json`` so ``status``, ``doctor`` and ``health clear``
in other processes see them and a restart keeps them; the failures that have not
tripped anything yet are kept in memory only (a restart forgets them, which is
safe: they are counted again). What each decision means is pure
(``fingerprint``, ``tripping``, ``workspace_of``, ``holding``); ``Breaker`` keeps the
state.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
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
WORKSPACE = "workspace"

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


def workspace_scope(board: str, workspace: str) -> str:
    """A task's workspace on its board: ``workspace:work:/srv/repo``."""
    return f"{WORKSPACE}:{board}:{workspace}"


def workspace_of(where: str, board: str) -> str | None:
    """The workspace ``where`` names on ``board``, or None: another kind or board (pure).
    Board slugs hold no colon (``names.py``), so the first after the board ends it."""
    prefix = f"{WORKSPACE}:{board}:"
    return where[len(prefix):] if where.startswith(prefix) else None


def named(where: str) -> str:
    """A scope as a sentence names it: ``provider codex``, ``workspace /srv/repo of board
    work`` (escaped: a workspace is the board's text)."""
    kind, _, name = where.partition(":")
    if kind == WORKSPACE:
        board, _, workspace = name.partition(":")
        return f"workspace {display.escaped(workspace)} of board {board}"
    return f"{kind} {display.escaped(name)}"


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
    wider: str | None = None
    """The scope this one's failures also count towards (a workspace's board)."""

    def scopes(self) -> tuple[str, ...]:
        return (self.scope,) if self.wider is None else (self.scope, self.wider)


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
        return (
            f"{named(self.scope)} is marked broken: {self.count} tasks failed the same way "
            f"({display.escaped(self.reason)}); 'lane-runner health clear' once it is fixed"
        )


def holding(trips: Mapping[str, Trip], board: str, workspace: str | None) -> Trip | None:
    """The trip that keeps a ready task of ``board`` working in ``workspace`` from being
    claimed: its workspace's, else its board's; None when neither is marked broken (pure).
    A due probe may still take it."""
    scopes = [scope(BOARD, board)]
    if workspace is not None:
        scopes.insert(0, workspace_scope(board, workspace))
    return next((trips[where] for where in scopes if where in trips), None)


def in_force(trips: Mapping[str, Trip], where: str, now: float) -> Trip | None:
    """The trip that keeps ``where`` from being used now; none while a probe is due (pure)."""
    trip = trips.get(where)
    return trip if trip is not None and now < trip.probe_at else None


def broken_workspaces(trips: Mapping[str, Trip], board: str, now: float) -> frozenset[str]:
    """The workspaces of ``board`` whose tasks a claim passes over now (pure; those whose
    probe is due are not among them: a claim of one of their tasks is the probe)."""
    return frozenset(
        workspace
        for where, trip in trips.items()
        if (workspace := workspace_of(where, board)) is not None and now < trip.probe_at
    )


def tripping(
    failures: Sequence[Failure], threshold: int, window: float, now: float
) -> list[tuple[str, str, list[Failure]]]:
    """Each (scope, fingerprint) with failures of at least ``threshold`` distinct tasks
    within ``window`` seconds before ``now``, with those failures (pure). A failure
    counts in its scope and in its wider one."""
    if threshold <= 0:
        return []
    groups: dict[tuple[str, str], list[Failure]] = {}
    for failure in failures:
        if now - failure.at <= window:
            for where in failure.scopes():
                groups.setdefault((where, failure.fingerprint), []).append(failure)
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
        """File one failure; the trip it caused, if it caused one: of its own scope, else
        (the failure spread over several of its kind) of the wider one. Nothing more is
        tripped by a failure in a scope already broken (a probe that failed again)."""
        with self._lock:
            trips = read(self.path)
            if any(where in trips for where in failure.scopes()):
                return None  # accounted for by the trip in force
            self._failures = [
                f for f in self._failures if failure.at - f.at <= self.window
            ][-KEPT:] + [failure]
            found = {
                (where, fingerprint): failures
                for where, fingerprint, failures in tripping(
                    self._failures, self.threshold, self.window, failure.at
                )
            }
            for where in failure.scopes():
                tripped = found.get((where, failure.fingerprint))
                if tripped is None:
                    continue
                trips[where] = _trip(where, failure, tripped, self.probe_interval)
                _write(self.path, trips)
                # The trip accounts for them: they count towards no other trip.
                self._failures = [f for f in self._failures if where not in f.scopes()]
                return trips[where]
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
        """``in_force`` of the trips in this home."""
        return in_force(read(self.path), where, now)

    def broken_workspaces(self, board: str, now: float) -> frozenset[str]:
        """``broken_workspaces`` of the trips in force."""
        return broken_workspaces(read(self.path), board, now)

    def succeeded(self, where: str, wider: str | None = None) -> bool:
        """``where`` worked (a probe, or a run begun before the trip): forget its failures
        and clear its trip and the wider scope's (a board's probe is a task in one of its
        workspaces). Failures of other workspaces still count towards the board."""
        with self._lock:
            self._failures = [f for f in self._failures if f.scope != where]
            trips = read(self.path)
            lifted = [name for name in (where, wider) if name and trips.pop(name, None)]
            if not lifted:
                return False
            _write(self.path, trips)
            for name in lifted:
                log.warning("%s works again: its breaker is cleared", name)
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


def _trip(where: str, failure: Failure, tripped: list[Failure], probe_interval: float) -> Trip:
    """The trip ``failure`` causes in ``where``, with the failures that tripped it: their
    latest reason, the tasks they name, its first probe after ``probe_interval``."""
    tasks = sorted({f.task for f in tripped})
    return Trip(
        scope=where,
        fingerprint=failure.fingerprint,
        reason=tripped[-1].reason[:500],
        tasks=tasks[:NAMED],
        count=len(tasks),
        tripped_at=failure.at,
        probe_at=failure.at + probe_interval,
    )
