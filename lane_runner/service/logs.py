"""Structured logs: JSON lines on stderr for journald, plain text for a terminal
(docs/ARCHITECTURE.md §6).

Every record carries the board, task and run it concerns when one is known:
either passed with ``extra=logs.about(board, task, run)`` or set for a whole
run by the executor thread with ``with logs.run_context(...)``, and, once the CLI
has named it, the run's provider session (``bind_session``): the id an operator
needs to find the conversation in the CLI's own logs. A contextvar, not a
thread-local, so the binding follows the code that owns the run.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import orjson

from lane_runner import display, redact

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")
CONTEXT_KEYS = ("board", "task", "run", "session")
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]

_context: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "lane_runner_log_context", default=None
)


def about(board: str | None, task: str | None = None, run: int | None = None) -> dict[str, Any]:
    """``extra=`` for one record: which board/task/run it is about."""
    return {"board": board, "task": task, "run": run}


@contextlib.contextmanager
def run_context(board: str, task: str, run: int) -> Iterator[None]:
    """Tag every record logged inside (in this context) with the run."""
    token = _context.set(about(board, task, run))
    try:
        yield
    finally:
        _context.reset(token)


def bind_session(session_id: str) -> None:
    """From now on in this run's context, records also name its provider session. Outside
    a run's context there is nothing to bind it to, and nothing is done."""
    bound = _context.get()
    if bound is not None:
        _context.set({**bound, "session": session_id})


def context_of(record: logging.LogRecord) -> dict[str, Any]:
    """The record's own board/task/run (``extra=``) over the current run context."""
    bound = _context.get() or {}
    found = {key: getattr(record, key, None) or bound.get(key) for key in CONTEXT_KEYS}
    return {key: value for key, value in found.items() if value is not None}


def timestamp_of(record: logging.LogRecord) -> str:
    """When the record was made: ISO 8601 UTC with milliseconds, in both formats."""
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


def message(record: logging.LogRecord) -> str:
    """The record's message, bounded, then redacted: a URL with credentials quoted by
    any library (an HTTP client's error, a driver's) never reaches the log, and a
    worker's megabytes cost no more than the bound."""
    return redact.shown(record.getMessage(), display.MAX_LOG_CHARS)


def exception_text(formatter: logging.Formatter, exc_info: ExcInfo) -> str:
    """A record's exception, bounded, then redacted (its message may quote anything)."""
    return redact.shown(formatter.formatException(exc_info), display.MAX_TRACEBACK_CHARS)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp, level, logger, event, then board/task/run."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "timestamp": timestamp_of(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": message(record),
            **context_of(record),
        }
        if record.exc_info:
            document["exception"] = exception_text(self, record.exc_info)
        return orjson.dumps(document, default=str).decode()


class TextFormatter(logging.Formatter):
    """``<timestamp> lane-runner: <level>: <message> [board/task run N]`` for people at a
    terminal or in a file: a daemon's text log is read long after it was written.

    One record, one line: the message's control characters (a worker's terminal
    escapes, its newlines) are shown as ``\\xNN``; the exception text keeps its lines."""

    def format(self, record: logging.LogRecord) -> str:
        context = context_of(record)
        where = "/".join(str(context[key]) for key in ("board", "task") if key in context)
        if "run" in context:
            where = f"{where} run {context['run']}".strip()
        if "session" in context:
            where = f"{where} session {context['session']}".strip()
        line = (
            f"{timestamp_of(record)} lane-runner: {record.levelname.lower()}: "
            f"{display.escaped(message(record))}"
        )
        if where:
            line += f" [{where}]"
        if record.exc_info:
            text = exception_text(self, record.exc_info)
            line += "\n" + display.escaped(text, keep_newlines=True)
        return line


def choose_format(requested: str | None, environ: Mapping[str, str], stderr_is_tty: bool) -> str:
    """Asked for wins; under systemd (``JOURNAL_STREAM``) JSON; otherwise text.

    A pipe that is not the journal is most often a person's ``2>&1 | less``, so
    text stays the default there too.
    """
    if requested is not None:
        return requested
    if environ.get("JOURNAL_STREAM") and not stderr_is_tty:
        return "json"
    return "text"


def setup(log_format: str, level: str) -> None:
    """Install the one stderr handler on the root logger (replacing any earlier one)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
