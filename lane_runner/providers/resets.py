"""When a usage limit a CLI described in words resets, as a moment (pure).

The CLIs print the reset as a wall-clock time in a zone: claude "resets 8pm
(America/New_York)", codex "try again at 3:28 PM" (in the CLI's local zone) or,
further away, "try again at Dec 2nd, 2026 2:38 AM". The adapters find those words;
this module turns the pieces into seconds since the epoch, the next such moment
after ``now`` when the words give no date.
"""

from __future__ import annotations

import logging
import re
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


def _hour24(hour: int, meridiem: str | None) -> int | None:
    """``hour`` on a 24-hour clock (``12am`` is 0, ``12pm`` 12); None when it is none."""
    if meridiem is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if meridiem.lower() == "pm" else 0)
    return hour if 0 <= hour <= 23 else None


def _on_date(
    current: datetime, month: str, day: int, year: int | None, hour: int, minute: int
) -> datetime:
    """The time on the date given; a date without a year more than a day past is next
    year's ("Jan 2" said on Dec 31). ValueError for a date that is none."""
    number = MONTHS.index(month[:3].lower()) + 1
    moment = current.replace(year=year or current.year, month=number, day=day,
                             hour=hour, minute=minute, second=0, microsecond=0)
    if year is None and moment < current - timedelta(days=1):
        moment = moment.replace(year=moment.year + 1)
    return moment


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
    hour24 = _hour24(hour, meridiem)
    if hour24 is None or not 0 <= minute <= 59:
        return None
    current = datetime.fromtimestamp(now, where)
    try:
        if month is not None and day is not None:
            return _on_date(current, month, day, year, hour24, minute).timestamp()
        moment = current.replace(hour=hour24, minute=minute, second=0, microsecond=0)
    except ValueError:  # a day the month does not have, an unknown month
        return None
    if moment <= current:
        moment += timedelta(days=1)
    return moment.timestamp()


#: A wait said as a span: "Please retry in 3h2m1s", "retry after 30 seconds",
#: ``"retryDelay": "10921s"`` (Google's RetryInfo), "try again in 5 minutes".
_DELAY = re.compile(
    r"(?:retry|try again)\w*\"?\s*(?:in|after|:)\s*\"?(?P<span>(?:\d+(?:\.\d+)?\s*"
    r"(?:h(?:ours?)?|m(?:in(?:utes?)?)?|s(?:ec(?:onds?)?)?)(?![a-z])\s*)+)",
    re.I,
)
_PIECE = re.compile(r"(\d+(?:\.\d+)?)\s*([hms])", re.I)
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def after_delay(text: str, now: float) -> float | None:
    """The moment a wait the words say as a span ends (``now`` plus the span), or None."""
    found = _DELAY.search(text)
    if found is None:
        return None
    span = sum(float(amount) * _SECONDS[unit.lower()]
               for amount, unit in _PIECE.findall(found["span"]))
    return now + span if span > 0 else None
