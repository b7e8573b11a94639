"""Text from outside made fit to show: bounded before anything reads it, control
characters escaped before a terminal sees them.

A worker's summary, a CLI's error or a router's rationale may be megabytes long and
may hold terminal escape sequences. Whatever the runner logs or stores as a run
reason is cut here first, so redaction, a pattern or a terminal never gets more
than the bound; what reaches a terminal has its control characters shown as
``\\xNN``.
"""

from __future__ import annotations

import re
import string

#: A run reason (on the board, in a log line): enough to say why, short enough to show.
MAX_REASON_CHARS = 2000
#: One log record's message, and the exception text that may follow it.
MAX_LOG_CHARS = 16 * 1024
MAX_TRACEBACK_CHARS = 64 * 1024

#: C0 and C1 control characters but tab: ESC starts terminal sequences (that retitle
#: the window, clear the screen, fake a prompt), CR and BS overwrite what was printed.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clipped(text: str, limit: int, *, more: int = 0) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out (``more``:
    how many a caller left out before, past the end of ``text``).

    A slice, so it costs the same whatever the text's size and comes before anything
    else reads it. A word cut in two that holds ``://`` is left out whole: half a URL
    could keep its password from redaction (``redact``), which needs the ``@``.
    """
    if len(text) <= limit:
        return f"{text}… [{more} more characters]" if more else text
    head = text[:limit]
    if not text[limit].isspace():
        word = max(map(head.rfind, string.whitespace)) + 1
        if "://" in head[word:]:
            head = head[:word]
    return f"{head}… [{len(text) - len(head) + more} more characters]"


def escaped(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character but tab (and newline, if kept) shown as
    ``\\xNN``, so nothing it holds can drive the terminal that shows it."""
    pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL
    return pattern.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
