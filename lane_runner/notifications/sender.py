"""One notification to one URL, through Apprise (the extra ``notify``).

Apprise speaks a hundred services by URL; the runner hands it a subject and a body.
Where the service carries a payload of our choosing (Apprise's ``json://``, ``xml://``
and ``form://``), the notification's id also goes as a field and a header, so a
receiver can deduplicate without parsing the text; everywhere else the body's last
line says it (``notices.Message.body``).
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lane_runner import extras, redact
from lane_runner.errors import UsageError
from lane_runner.notifications.notices import Message

log = logging.getLogger(__name__)

#: The schemes whose payload and headers Apprise lets the URL extend.
PAYLOAD_SCHEMES = ("json", "jsons", "xml", "xmls", "form", "forms")
#: The header that carries the id.
ID_HEADER = "X-Lane-Runner-Notification"


class Unsendable(Exception):
    """The URL cannot be sent to (Apprise does not know it); retrying will not help."""


def available() -> bool:
    try:
        import apprise  # noqa: F401
    except ImportError:
        return False
    return True


def install_hint() -> str:
    return "notifications need Apprise: " + extras.install_hint("notify")


def require() -> None:
    """UsageError naming the extra when Apprise is not installed."""
    if not available():
        raise UsageError(install_hint())


def with_id(url: str, notice_id: str) -> str:
    """``url`` with the id as a payload field (``:id``) and a header, where it can carry them."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in PAYLOAD_SCHEMES:
        return url
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(":id", notice_id), (f"+{ID_HEADER}", notice_id)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def send(url: str, message: Message) -> str | None:
    """Send ``message`` to ``url``; None when it went, else why not (redacted: Apprise's
    words can quote the URL). Raises Unsendable for a URL Apprise does not know."""
    import apprise

    sender = apprise.Apprise()
    if not sender.add(with_id(url, message.id)):
        scheme = urlsplit(url).scheme or "(none)"
        raise Unsendable(f"Apprise does not know a URL of scheme {scheme!r} of this form")
    capture = apprise.LogCapture(level=logging.WARNING, fmt="%(message)s")  # type: ignore[no-untyped-call]
    with capture as captured:
        sent = sender.notify(title=message.subject(), body=message.body())
        said = captured.getvalue()
    if sent:
        return None
    words = " ".join(line.strip() for line in said.splitlines() if line.strip())
    return redact.text(words or "Apprise reported the send failed")[:500]
