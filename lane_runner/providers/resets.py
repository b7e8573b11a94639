"""When a usage limit a CLI described in words resets, as a moment (pure).

The CLIs print the reset as a wall-clock time in a zone: claude "resets 8pm
(America/New_York)", codex "try again at 3:28 PM" (in the CLI's local zone) or,
further away, "try again at Dec 2nd, 2026 2:38 AM". The adapters find those words;
this module turns the pieces into seconds since the epoch, the next such moment
after ``now`` when the words give no date.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

log = logging.getLogger(__name__)

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def zone(name: str | None) -> tzinfo | None:
    """The zone ``name`` names (IANA, or ``UTC``); the host's local zone for None or empty.
    None when the name is unknown: then the words cannot be trusted for a moment."""
    if not name:
        return datetime.now().astimezone().tzinfo
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError) as error:
        log.warning("a usage limit names the zone %r, which this host does not know: %s",
                    name, error)
        return None


def wall_time(
    now: float,
    where: tzinfo,
    hour: int,
    minute: int = 0,
    meridiem: str | None = None,
    *,
    month: str | None = None,
    day: int | None = None,
    year: int | None = None,
) -> float | None:
    """The moment a clock in ``where`` shows the time given: on the date given, else the
    first such time after ``now``. None when the pieces are not a time."""
    if meridiem is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if meridiem.lower() == "pm" else 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    current = datetime.fromtimestamp(now, where)
    try:
        if month is not None and day is not None:
            number = MONTHS.index(month[:3].lower()) + 1
            moment = current.replace(year=year or current.year, month=number, day=day,
                                     hour=hour, minute=minute, second=0, microsecond=0)
            if year is None and moment < current - timedelta(days=1):
                moment = moment.replace(year=moment.year + 1)  # "Jan 2" said on Dec 31
            return moment.timestamp()
        moment = current.replace(hour=hour, minute=minute, second=0, microsecond=0)
    except ValueError:  # a day the month does not have, an unknown month
        return None
    if moment <= current:
        moment += timedelta(days=1)
    return moment.timestamp()
