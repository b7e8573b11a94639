"""Secrets out of everything the runner prints or stores: the one redaction gate.

A worker's summary, a hook's output, a router's error body, a CLI's stderr may quote a
credential: a URL's password (``https://bot:ghp_…@git.example``), a query secret
(``/v1?api_key=…``), an ``Authorization`` value (``Bearer …``, ``auth=Basic …``), a bare
``user:pass@host`` or a token by its shape (``ghp_…``, ``sk-ant-…``, ``xoxb-…``). Such
text reaches the board, the log and ``--json``; each of those passes it through here
where the text enters it, not at each caller (docs/secrets-and-budgets.md): the board's
writes (``board/gate.py``), the log formatters (``service/logs.py``) and the CLI's JSON
(``cli/output.py``). :func:`url` is for a URL the runner holds, :func:`text` for free
text, :func:`shown` for free text of any size cut to a bound, :func:`document` for a
JSON document.

Every pattern here runs in time linear in its input (tests/test_linear_text.py): each
one starts only where a run of its characters starts (a lookbehind) and reads that
run once (possessive quantifiers), so 2 MB of hostile text costs what 2 MB costs. And
the gate is idempotent: text it has passed passes again unchanged, so a text that
crosses two gates (a redacted reason stored on the board) reads the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

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

#: What ends a word that may hold ``user:pass@host``.
_WORD_END = r"\s/@'\"`<>()\[\]{},;|\\"
#: ``user:pass@host`` with or without a scheme before it: from the start of a word, the
#: user (no colon), a colon, the password (to the ``@``), then a host.
_USERINFO = re.compile(
    rf"(?<![^{_WORD_END}])(?P<user>[^{_WORD_END}:]*+):[^{_WORD_END}]++@(?=[A-Za-z0-9\[])"
)

#: Where a secret value ends: ``&`` (the next query parameter), a quote, a separator.
_VALUE = r"[^\s&#'\"`<>,;()\[\]{}]++"
#: An authorization scheme that may stand before a credential (``Basic dXNl…``).
_SCHEME = r"(?:(?i:basic|bearer|token|digest|negotiate)[ \t]++)?"
#: Names whose values are secrets, by how they end (``api_key``, ``access_token``,
#: ``client_secret``, ``auth``…): one fixed-width lookbehind each, so the test costs the
#: same at every position. ``tokens`` (``input_tokens=1280``) is not one.
_SECRET_ENDINGS = (
    "token", "key", "secret", "password", "passwd", "pwd", "auth", "authorization",
    "sig", "signature", "credential", "credentials",
)
_ENDS_AS_SECRET = "(?:" + "|".join(f"(?<={ending})" for ending in _SECRET_ENDINGS) + ")"
#: ``name=value`` anywhere (a query outside a parseable URL: ``/v1?api_key=…``,
#: ``&token=…``, ``auth=Basic …``), and ``"name": "value"`` in JSON.
_ASSIGNMENT = re.compile(
    rf"(?i){_ENDS_AS_SECRET}(?P<equals>[ \t]*+=[ \t]*+|\"[ \t]*+:[ \t]*+\")(?P<scheme>{_SCHEME})"
    rf"{_VALUE}"
)
#: An ``Authorization:`` (or ``Proxy-Authorization:``) header's value.
_HEADER = re.compile(
    rf"(?i)(?<![A-Za-z0-9_])(?P<name>(?:proxy-)?authorization[ \t]*+:[ \t]*+)"
    rf"(?P<scheme>{_SCHEME}){_VALUE}"
)
#: ``Bearer``/``Basic`` before something shaped as a credential (8 characters or more
#: of base64, with a capital, a digit or ``+/=`` after its first): ``Basic
#: authentication failed`` stays as it is.
_SCHEME_CREDENTIAL = re.compile(
    r"(?i:(?<![A-Za-z0-9_-])(?P<scheme>bearer|basic)[ \t]++)"
    r"(?=[A-Za-z0-9._~+/=-]{8})(?=[A-Za-z0-9._~+/-][a-z._~-]*+[A-Z0-9+/=])"
    r"[A-Za-z0-9._~+/-]++=*+"
)
#: Tokens known by their shape: GitHub's (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``,
#: ``ghr_``, ``github_pat_``), OpenAI's and Anthropic's (``sk-…``, ``sk-ant-…``),
#: Slack's (``xoxb-``, ``xoxp-``…, ``xapp-``), GitLab's (``glpat-``), AWS access key ids
#: and Google API keys. The prefix stays: it says which kind of credential it was.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<prefix>gh[pousr]_|github_pat_|sk-|xox[abposr]-|xapp-|glpat-)"
    r"[A-Za-z0-9_-]{10,}+"
    r"|(?<![A-Za-z0-9])(?P<fixed>AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9])"
)


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
    netloc = _hidden_netloc(parts, port) if parts.password is not None else parts.netloc
    query = _hidden_query(parts.query) if parts.query else parts.query
    if (netloc, query) == (parts.netloc, parts.query):
        return value  # nothing hidden: the URL as written (urlunsplit would lower its scheme)
    scheme = value[: len(parts.scheme)]
    return urlunsplit((scheme, netloc, parts.path, query, parts.fragment))


def _hidden_netloc(parts: SplitResult, port: int | None) -> str:
    """The URL's user, host and port with its password hidden."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.username or ''}:{HIDDEN}@{host}" + (f":{port}" if port else "")


def _hidden_query(query: str) -> str:
    """``query`` with the values of secret parameters hidden; unchanged when it has none."""
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(SECRET_PARAMETERS.search(name) for name, _ in pairs):
        return query
    return urlencode(
        [(n, HIDDEN if SECRET_PARAMETERS.search(n) else v) for n, v in pairs], safe="*"
    )


def urls(value: str) -> str:
    """``value`` with every URL in it passed through :func:`url`; linear in its length."""
    return _URL_IN_TEXT.sub(_redacted, value)


def text(value: str) -> str:
    """``value`` with every secret this module knows hidden; linear in its length,
    and ``text(text(v)) == text(v)``."""
    value = urls(value)
    value = _USERINFO.sub(lambda m: f"{m['user']}:{HIDDEN}@", value)
    value = _HEADER.sub(lambda m: f"{m['name']}{m['scheme']}{HIDDEN}", value)
    value = _ASSIGNMENT.sub(_assignment, value)
    value = _SCHEME_CREDENTIAL.sub(lambda m: f"{m['scheme']} {HIDDEN}", value)
    return _TOKEN.sub(_token, value)


def _assignment(match: re.Match[str]) -> str:
    return f"{match['equals']}{match['scheme']}{HIDDEN}"


def _token(match: re.Match[str]) -> str:
    return f"{match['prefix']}{HIDDEN}" if match["prefix"] else HIDDEN


def _redacted(match: re.Match[str]) -> str:
    """A scheme starts with a letter: what precedes the run's first letter stays as it is."""
    found = match.group(0)
    letter = _LETTER.search(found, 0, found.index("://"))
    if letter is None:
        return found
    return found[: letter.start()] + url(found[letter.start() :])


#: Characters past a cut redacted with the text before it: a secret the cut runs
#: through is hidden whole before the cut could make it unrecognisable.
_MARGIN = 4096


def shown(value: str, limit: int = display.MAX_REASON_CHARS) -> str:
    """``value`` redacted, then cut to ``limit`` characters: what a log line or a run
    reason carries. Only ``limit`` characters and a margin past them are read, so the
    cost is bounded whatever the size of ``value``."""
    window = value[: limit + _MARGIN]
    return display.clipped(text(window), limit, more=len(value) - len(window))


def document(value: Any) -> Any:
    """A JSON document (dicts, lists, strings, numbers) with every string in it, keys
    included, passed through :func:`text`: what ``--json`` prints and the board keeps
    as a result or metadata."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, Mapping):
        return {document(key): document(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [document(item) for item in value]
    return value


def setting(name: str, value: str) -> str:
    """A named setting's value as shown (``config show``, the dry run): hidden when the
    name says it is a credential, else with the credentials of any URL in it hidden."""
    return HIDDEN if SECRET_NAME.search(name) else text(value)
