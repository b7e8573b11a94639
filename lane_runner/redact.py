"""Secrets out of everything the runner prints or stores.

A URL may carry credentials (``http://user:pass@router/``, ``?token=...``), and a URL
reaches logs, run reasons on the board, ``doctor`` and ``config show``. Every such
place passes it through :func:`url` (a URL the runner holds), :func:`text` (free
text that may quote one, such as an HTTP client's error message) or :func:`shown`
(free text of any size: a log line, a run reason).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lane_runner import display

HIDDEN = "***"

#: Query parameters whose values are secrets by name.
SECRET_PARAMETERS = re.compile(r"(?i)(token|key|secret|password|passwd|pass|auth|sig|signature)")

#: Names of variables and settings whose values are credentials (ANTHROPIC_API_KEY,
#: ANTHROPIC_AUTH_TOKEN, AWS_SECRET_ACCESS_KEY, CORP_LLM_KEY, an ``Authorization``
#: header...); codex's ``env_key`` only names the variable a key is in.
SECRET_NAME = re.compile(
    r"(?i)token|secret|password|passwd|authoriz|credential|api_?key|cookie|(?<!env_)key$"
)

#: A URL with a scheme inside free text, matched from the start of the run of scheme
#: characters it ends (the lookbehind): a match tried from every position of a long
#: run such as ``a-a-a-…`` would scan the rest of the run each time, quadratic in its
#: length. The scheme proper starts at the run's first letter (``_redacted``).
_URL_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z0-9+.-]+://[^\s'\"<>]+")
_LETTER = re.compile(r"[A-Za-z]")


def url(value: str) -> str:
    """``value`` with its password and secret query values replaced by ``***``.

    The user name stays (it tells the operator which account is configured); a
    string that does not parse as a URL is returned unchanged.
    """
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return value
    netloc = parts.netloc
    if parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username or ''}:{HIDDEN}@{host}" + (f":{port}" if port else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(SECRET_PARAMETERS.search(name) for name, _ in pairs):
            query = urlencode(
                [(n, HIDDEN if SECRET_PARAMETERS.search(n) else v) for n, v in pairs], safe="*"
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def text(value: str) -> str:
    """``value`` with every URL in it passed through :func:`url`; linear in its length."""
    return _URL_IN_TEXT.sub(_redacted, value)


def _redacted(match: re.Match[str]) -> str:
    """A scheme starts with a letter: what precedes the run's first letter stays as it is."""
    found = match.group(0)
    letter = _LETTER.search(found, 0, found.index("://"))
    if letter is None:
        return found
    return found[: letter.start()] + url(found[letter.start() :])


def shown(value: str, limit: int = display.MAX_REASON_CHARS) -> str:
    """``value`` cut to ``limit`` characters, then redacted: what a log line or a run
    reason carries, at the cost of the bound whatever the size of ``value``."""
    return text(display.clipped(value, limit))


def setting(name: str, value: str) -> str:
    """A named setting's value as shown (``config show``, the dry run): hidden when the
    name says it is a credential, else with the credentials of any URL in it hidden."""
    return HIDDEN if SECRET_NAME.search(name) else text(value)
