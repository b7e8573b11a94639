"""Whether the daemon claims now, how many runs, and from which boards (pure).

The daemon (``daemon.py``) reads what the guards look at into one value, ``Readings``
(this runner's pause, memory, disk space, the storm breaker's trips, the providers'
caps, and each board's pause and day's spend), and ``admit`` turns it into a
``Decision``: what holds every claim back (``Hold``, which ``status`` and the
``lane_runner_claims_held`` gauge show), how many runs may start in this pass, and the
boards they may come from with the workspaces each claim passes over. So "why is
nothing claimed" is answered from plain values, and tested without a daemon
(``tests/daemon/test_admission.py``); the daemon keeps the reading, the claims and
their effects (a breaker's probe begins when its claim is made).

The guards, in the order they answer (docs/ARCHITECTURE.md §6): the runner's pause,
a memory shortage, a disk shortage, every provider marked broken, every provider at
its cap; then, of the boards, every one paused, every open one past its daily budget,
every one left marked broken. Elevated memory pressure lets one run start per pass,
passes ``ELEVATED_PACE`` apart, without holding anything.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from lane_runner.config import Config
from lane_runner.names import PROVIDERS
from lane_runner.service import breaker, disk, memory
from lane_runner.service.breaker import Trip
from lane_runner.service.pause import Pause
from lane_runner.usage import budget
from lane_runner.usage.spend import Totals

#: Seconds between two passes that start a run under elevated memory pressure: each run
#: takes its memory a moment after it starts, so a burst of starts would overshoot.
ELEVATED_PACE = 1.0


class HoldKind(enum.StrEnum):
    """Why free slots go unclaimed (``metrics.HOLD_REASONS``, status's ``hold.kind``)."""

    PAUSED = "paused"
    MEMORY = "memory"
    DISK = "disk"
    BREAKER = "breaker"
    CAPS = "caps"
    BOARD_PAUSED = "board_paused"
    BUDGET = "budget"


@dataclass(frozen=True)
class Hold:
    kind: HoldKind
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": str(self.kind), "reason": self.reason}


@dataclass(frozen=True)
class Guards:
    """The configured limits ``admit`` weighs the readings against (0: a guard is off)."""

    min_memory_mb: int = 0
    elevated_memory_mb: int = 0
    min_disk_mb: int = 0
    daily_budget_usd: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, cfg: Config) -> Guards:
        return cls(
            cfg.min_available_memory_mb, cfg.elevated_memory_mb, cfg.min_free_disk_mb,
            cfg.daily_budget_usd,
        )


@dataclass(frozen=True)
class BoardReading:
    slug: str
    paused: bool = False
    today: Totals | None = None
    """The board's spend today (UTC) on every runner of it; None when it has no daily
    budget (then it is not read)."""


@dataclass(frozen=True)
class Readings:
    """What the guards look at, read once per claim pass."""

    now: float = 0.0
    """The wall clock (the breaker's probe times)."""
    free: int = 0
    """Slots free: the concurrency less the runs in flight."""
    stopping: bool = False
    paused: Pause | None = None
    memory: memory.Reading | None = None
    disk: tuple[disk.Space, ...] = ()
    trips: Mapping[str, Trip] = field(default_factory=dict)
    """The breaker's trips, by scope."""
    room: int | None = None
    """Runs the providers' caps leave room for; None: a provider is uncapped."""
    since_elevated: float = math.inf
    """Seconds since a run last started under elevated memory pressure."""
    boards: tuple[BoardReading, ...] = ()
    """Every board of the store; left empty while the node holds claims anyway (``admit``
    does not look at them then, so the daemon does not read them)."""


@dataclass(frozen=True)
class Claimable:
    """A board a claim may come from in this pass."""

    slug: str
    skip: frozenset[str] = frozenset()
    """Its workspaces marked broken: the claim passes over their tasks."""
    probing: frozenset[str] = frozenset()
    """Its workspaces marked broken whose probe is due: a task of one is the probe."""
    probe: bool = False
    """The board is marked broken and its probe is due: its claim is the probe."""

    def probed(self, workspace: str | None) -> Claimable:
        """After a claim in ``workspace``: a probe begun there lets no second task of it
        through in the same pass."""
        if workspace not in self.probing:
            return self
        return replace(self, skip=self.skip | {workspace}, probing=self.probing - {workspace})


@dataclass(frozen=True)
class Decision:
    hold: Hold | None = None
    """Why nothing is claimed although slots are free; None: nothing holds."""
    claims: int = 0
    """How many runs may start in this pass."""
    boards: tuple[Claimable, ...] = ()
    pressure: str = memory.OK
    """The memory pressure read (``memory.pressure``)."""


def admit(readings: Readings, guards: Guards) -> Decision:
    """What may be claimed now, given ``readings``."""
    pressure = memory.pressure(readings.memory, guards.min_memory_mb, guards.elevated_memory_mb)
    if readings.stopping or readings.free <= 0:
        return Decision(pressure=pressure)
    hold = node_hold(readings, guards)
    if hold is not None:
        return Decision(hold, pressure=pressure)
    claims = readings.free if readings.room is None else min(readings.free, readings.room)
    if pressure == memory.ELEVATED:
        # One new run per pass, and passes ELEVATED_PACE apart: a claim changes the
        # board, which wakes the daemon's loop at once for another pass.
        if readings.since_elevated < ELEVATED_PACE:
            return Decision(pressure=pressure)
        claims = min(claims, 1)
    hold, boards = open_boards(readings, guards)
    return Decision(hold, claims, boards, pressure)


def node_hold(readings: Readings, guards: Guards) -> Hold | None:
    """Why this runner claims nothing now, whatever the boards say, or None."""
    if readings.paused is not None:
        return Hold(HoldKind.PAUSED, f"runner paused: {readings.paused.reason}")
    short = memory.shortage(readings.memory, guards.min_memory_mb)
    if short is not None:
        return Hold(HoldKind.MEMORY, short)
    full = disk.shortage(readings.disk, guards.min_disk_mb)
    if full is not None:
        return Hold(HoldKind.DISK, full)
    broken = _broken_providers(readings)
    if len(broken) == len(PROVIDERS):
        return Hold(HoldKind.BREAKER, "; ".join(trip.describe() for trip in broken))
    if readings.room is not None and readings.room <= 0:
        return Hold(HoldKind.CAPS, "every provider is at its max_running_<provider> cap")
    return None


def _broken_providers(readings: Readings) -> list[breaker.Trip]:
    """The storm breaker's trips in force on providers."""
    scopes = [breaker.scope(breaker.PROVIDER, provider) for provider in PROVIDERS]
    return [
        trip for where in scopes if (trip := breaker.in_force(readings.trips, where, readings.now))
    ]


def open_boards(readings: Readings, guards: Guards) -> tuple[Hold | None, tuple[Claimable, ...]]:
    """The boards claims may come from: paused ones are skipped (``claim`` would refuse
    them anyway, under the board lock), and so are those whose daily budget is spent
    and those the storm breaker marks broken; when none is left, the hold says why."""
    unpaused = [board for board in readings.boards if not board.paused]
    spent = _spent_boards(unpaused, guards)
    within = [board.slug for board in unpaused if board.slug not in spent]
    broken = _broken_boards(readings, within)
    hold = _boards_hold(readings.boards, unpaused, spent, within, broken)
    if hold is not None:
        return hold, ()
    return None, tuple(claimable(readings, slug) for slug in within if slug not in broken)


def _boards_hold(
    boards: tuple[BoardReading, ...],
    unpaused: list[BoardReading],
    spent: dict[str, str],
    within: list[str],
    broken: dict[str, breaker.Trip],
) -> Hold | None:
    """Why no board is left to claim from (every one paused, spent, or broken), or None."""
    if boards and not unpaused:
        slugs = ", ".join(board.slug for board in boards)
        return Hold(HoldKind.BOARD_PAUSED, f"every board is paused ({slugs})")
    if unpaused and len(spent) == len(unpaused):
        said = "; ".join(f"{slug}: {why}" for slug, why in spent.items())
        return Hold(HoldKind.BUDGET, f"every open board's daily budget is spent ({said})")
    if within and len(broken) == len(within):
        return Hold(HoldKind.BREAKER, "; ".join(trip.describe() for trip in broken.values()))
    return None


def _spent_boards(boards: list[BoardReading], guards: Guards) -> dict[str, str]:
    """Why each board whose daily budget is spent claims nothing more today, by slug."""
    return {board.slug: why for board in boards if (why := budget_spent(board, guards))}


def _broken_boards(readings: Readings, slugs: list[str]) -> dict[str, breaker.Trip]:
    """The storm breaker's trip in force on each board of ``slugs`` it marks broken."""
    return {
        slug: trip for slug in slugs
        if (trip := breaker.in_force(readings.trips, breaker.scope(breaker.BOARD, slug),
                                     readings.now))
    }


def budget_spent(board: BoardReading, guards: Guards) -> str | None:
    """Why nothing more is claimed on ``board`` today, or None."""
    if board.today is None:
        return None
    return budget.board_spent(guards.daily_budget_usd, board.slug, board.today)


def claimable(readings: Readings, slug: str) -> Claimable:
    """What a claim on ``slug`` passes over, and whether it is a probe."""
    skip = breaker.broken_workspaces(readings.trips, slug, readings.now)
    marked = {
        workspace for where in readings.trips
        if (workspace := breaker.workspace_of(where, slug)) is not None
    }
    return Claimable(
        slug,
        skip=skip,
        probing=frozenset(marked - skip),
        probe=breaker.scope(breaker.BOARD, slug) in readings.trips,
    )

