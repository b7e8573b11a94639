"""Printing for people (aligned tables) and for scripts (``--json``)."""

from __future__ import annotations

import errno
import os
import select
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from lane_runner import display, redact


def timestamp(value: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC (second precision), the form every JSON output uses."""
    if value is None:
        return None
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")



def printable(text: str) -> str:
    """``text`` safe for a terminal: its secrets hidden (``redact.text``), every control
    character but tab and newline shown as ``\\xNN``. Titles, bodies, reasons and CLI
    output come from other people and models; human output passes them through here
    (``--json`` keeps them exact but for secrets: ``json_bytes``)."""
    return display.escaped(redact.text(text), keep_newlines=True)


#: Exit status when the reader of the output went away: what a shell reports for a
#: program killed by SIGPIPE (128 + 13), as git's and kubectl's ``| head`` end.
READER_GONE = 141


def reader_gone() -> bool:
    """True when stdout is a pipe (or socket) whose reader has closed it.

    Asked of the kernel (``poll`` reports POLLERR on such a pipe), so a broken pipe
    met elsewhere (a socket, a child's stdin) is never taken for this one.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False  # replaced by something without a descriptor: nothing to poll
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def ensure_reader() -> None:
    """For commands that wait between writes (``logs -f``, ``status --watch``): end as a
    write would, with BrokenPipeError, once the reader has gone, instead of waiting on."""
    if reader_gone():
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def discard_stdout() -> None:
    """Point stdout at /dev/null, so what is still buffered is dropped at exit instead
    of failing there a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def json_bytes(document: Any, *, indent: bool = True) -> bytes:
    """``document`` as JSON, every string in it through the redaction gate
    (``redact.document``): the one way ``--json`` output is made, so none bypasses it."""
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(redact.document(document), option=option)


def print_json(document: Any) -> None:
    sys.stdout.buffer.write(json_bytes(document) + b"\n")
    sys.stdout.flush()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned plain-text table; ``None`` prints as ``-``."""
    cells = [[("-" if value is None else printable(str(value))) for value in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        for index, value in enumerate(row):
            widths[index] = max(widths[index], len(value))
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    print(table(headers, rows))


def duration(seconds: float | None) -> str | None:
    """A span for people: ``45s``, ``12m05s``, ``3h20m``, ``2d04h``."""
    if seconds is None:
        return None
    whole = max(0, int(seconds))
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
