"""The checks of the keys that bring people into the loop: ``notify`` (who hears of
what, per board) and ``approval`` (which runs and pushes wait for a person), with the
second factor's secret file (docs/notifications.md, docs/approvals.md)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lane_runner.config.checks import _number, _text, _toml_table
from lane_runner.names import is_valid_name

#: What a notification can be about, in the order docs/notifications.md lists them.
NOTIFY_EVENTS = (
    "done",
    "blocked",
    "gave_up",
    "review_requested",
    "changes_requested",
    "approval_needed",
    "budget_spent",
    "breaker_tripped",
    "not_claiming",
)
#: Minutes ready work may wait unclaimed before ``not_claiming`` is sent, unless a
#: board's entry says.
NOT_CLAIMING_MINUTES = 30.0
#: How a task's run and push wait for a person (``task approve``).
APPROVAL_MODES = ("none", "before_run", "before_push")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_NOTIFY_FIELDS = ("urls", "events", "not_claiming_minutes")


def _every_board(value: Any, key: str, example: str) -> dict[str, Any]:
    """A table of boards (``"*"``: every board without its own), from the file or, from
    the environment, as a TOML inline table."""
    value = _toml_table(value, key, example)
    if not isinstance(value, dict):
        raise ValueError(f"expected a table of boards, e.g. {key} = {example}")
    for board in value:
        if board != "*" and not is_valid_name(board):
            raise ValueError(f"{board!r} is not a board name (or '*' for every board)")
    return value


def _notify(value: Any) -> dict[str, dict[str, Any]]:
    """Per board: ``urls`` (Apprise URLs), ``events`` (default: all of ``NOTIFY_EVENTS``)
    and ``not_claiming_minutes``."""
    boards = _every_board(value, "notify", '{"*" = {urls = ["json://127.0.0.1:8080/hook"]}}')
    parsed: dict[str, dict[str, Any]] = {}
    for board, entry in boards.items():
        if not isinstance(entry, dict):
            raise ValueError(f"notify.{board} must be a table with urls = [...]")
        unknown = sorted(set(entry) - set(_NOTIFY_FIELDS))
        if unknown:
            raise ValueError(f"notify.{board}.{unknown[0]} is not a setting; expected "
                             f"{', '.join(_NOTIFY_FIELDS)}")
        parsed[board] = {
            "urls": _urls(board, entry.get("urls")),
            "events": _events(board, entry.get("events", list(NOTIFY_EVENTS))),
            "not_claiming_minutes": _number(1, 525600)(
                entry.get("not_claiming_minutes", NOT_CLAIMING_MINUTES)
            ),
        }
    return parsed


def _urls(board: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"notify.{board}.urls must be a list of Apprise URLs "
                         '(e.g. ["json://127.0.0.1:8080/hook"])')
    urls = [_text(url).strip() for url in value]
    for number, url in enumerate(urls):
        if not _URL.fullmatch(url):
            # The URL itself is never quoted: it may hold a token or a password.
            raise ValueError(f"notify.{board}.urls[{number}] is not a URL of the form "
                             "scheme://...; see https://github.com/caronc/apprise/wiki")
    return urls


def _events(board: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise ValueError(f"notify.{board}.events must be a list, e.g. [\"done\", \"blocked\"]")
    events = [_text(event).strip() for event in value]
    unknown = [event for event in events if event not in NOTIFY_EVENTS]
    if unknown:
        raise ValueError(f"notify.{board}.events: {unknown[0]!r} is not an event; expected "
                         f"{', '.join(NOTIFY_EVENTS)}")
    return [event for event in NOTIFY_EVENTS if event in events]


def _approval(value: Any) -> dict[str, str]:
    """One mode for every board (``"before_run"``), or per board
    (``{main = "before_push", "*" = "none"}``)."""
    if isinstance(value, str) and not value.strip().startswith("{"):
        value = {"*": value}
    boards = _every_board(value, "approval", '{main = "before_run"}')
    modes: dict[str, str] = {}
    for board, mode in boards.items():
        text = _text(mode).strip()
        if text not in APPROVAL_MODES:
            raise ValueError(f"approval.{board}: expected one of {', '.join(APPROVAL_MODES)}")
        modes[board] = text
    return modes


def _secret_file(value: Any) -> str | None:
    """An absolute path, or empty for none. The file is read when a code is checked,
    so its contents never sit in the configuration (or in ``config show``)."""
    text = _text(value).strip()
    if not text:
        return None
    if not Path(text).is_absolute():
        raise ValueError("expected an absolute path to the file holding the TOTP secret")
    return text


def destination(url: str) -> str:
    """A short stable name of a URL that never shows it: the outbox stores this, never
    the URL, and ``config show`` prints it beside the scheme."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:12]


def shown_url(url: str) -> str:
    """``json://…#3f2a9c01b2d4``: the scheme and the destination's name. Apprise URLs
    carry tokens in their host and path (``tgram://TOKEN/CHAT``), which no redaction of
    URLs finds, so nothing past the scheme is shown."""
    return f"{urlsplit(url).scheme}://…#{destination(url)}"


def shown_notify(value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        board: {**entry, "urls": [shown_url(url) for url in entry["urls"]]}
        for board, entry in value.items()
    }
