"""What the claim guards look at, read for one claim pass (``service/admission.py``
weighs it; this module only reads, and sets the memory and disk gauges it reads for).

Two parts, so a node that holds its claims anyway costs the boards nothing: the node's
(``node``: this runner's pause, memory, disk space, the breaker's trips, the providers'
caps) and the boards' (``boards``: each one's pause and, with a daily budget, its
day's spend on every runner of it).
"""

from __future__ import annotations

import logging
import time

from lane_runner import clock
from lane_runner.board.base import BoardUnavailable
from lane_runner.board.model import BoardPause
from lane_runner.service import disk, memory, metrics, pause
from lane_runner.service.admission import BoardReading, Readings
from lane_runner.service.services import Services
from lane_runner.usage import budget, share
from lane_runner.usage.spend import Totals

log = logging.getLogger(__name__)


def node(
    services: Services,
    *,
    free: int,
    stopping: bool,
    busy: int,
    workspaces: list[str],
    since_elevated: float,
) -> Readings:
    """This runner's part of the readings (``busy``: runs claimed, whatever they hold;
    ``workspaces``: the repositories whose disks the disk guard watches)."""
    reading = memory.read()
    metrics.memory_available(reading.available if reading else None)
    spaces = tuple(disk.measure([str(services.home.root), *workspaces]))
    for space in spaces:
        metrics.DISK_FREE.labels(space.path).set(space.free)
    return Readings(
        now=time.time(),
        free=free,
        stopping=stopping,
        paused=pause.read(services.home.pause_file),
        memory=reading,
        disk=spaces,
        trips=services.breaker.trips(),
        room=services.slots.room(busy),
        since_elevated=since_elevated,
    )


def boards(services: Services) -> tuple[BoardReading, ...]:
    """Each board's pause, and the day's spend of those open with a daily budget."""
    daily = services.cfg.daily_budget_usd
    found = []
    for slug in services.store.board_slugs():
        paused = board_pause(services, slug) is not None
        counted = not paused and budget.daily_budget(daily, slug) is not None
        found.append(BoardReading(slug, paused, spent_today(services, slug) if counted else None))
    return tuple(found)


def spent_today(services: Services, slug: str) -> Totals:
    """What ``slug`` spent today (UTC) on every runner of the board: its shared ledger
    and this home's own."""
    now, at_home = clock.now(), services.ledger.records(slug)
    try:
        with services.resting.use(slug):
            return share.spent_today(services.store.board(slug), at_home, now)
    except BoardUnavailable as error:
        # Its claim fails as well while it is away; this home's spend is all we know.
        log.debug("board %s's usage not readable: %s", slug, error)
        return share.spent_today(None, at_home, now)


def board_pause(services: Services, slug: str) -> BoardPause | None:
    """The board's pause; None also for a board that is away (resting now: its claim
    fails at once and is skipped there)."""
    try:
        with services.resting.use(slug):
            return services.store.board(slug).paused()
    except BoardUnavailable as error:
        log.debug("board %s skipped: %s", slug, error)
        return None
