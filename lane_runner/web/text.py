"""Every text a page or the API shows, through the one redaction gate and made inert.

Task titles, bodies, reasons and log lines are outside text: they may quote a secret
(``redact``) or hold terminal escapes and other control characters, which a page shows
as ``\\xNN`` (``display.escaped``) rather than passing on to whoever copies it into a
terminal. HTML escaping is Jinja's autoescape, after this; the templates' ``finalize``
hook sends every ``{{ value }}`` through :func:`shown`, so no template can forget it.
"""

from __future__ import annotations

import datetime
from typing import Any

from markupsafe import Markup

from lane_runner import display, redact

#: What a page shows for a field that has no value.
NOTHING = "-"


def shown(value: Any) -> Any:
    """A template value as the page shows it: text redacted and its control characters
    escaped (newlines and tabs kept); markup the console made itself (charts) as it is."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return NOTHING
    if isinstance(value, bool | int | float):
        return value
    return display.escaped(redact.text(str(value)), keep_newlines=True)


def when(at: float | None) -> str:
    """A moment as UTC wall time, to the second."""
    if at is None:
        return NOTHING
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def ago(seconds: float | None) -> str:
    """``12 s``, ``3 min``, ``2.5 h``: an age or a time left, for people."""
    if seconds is None:
        return NOTHING
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
