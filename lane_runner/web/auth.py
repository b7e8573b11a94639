"""Who may read and who may act (docs/console.md, "Access").

Reading is open while the console listens on loopback only; bound beyond it, reading
needs the token too. Controls always need it: ``LANE_RUNNER_WEB_TOKEN``, else the file
``web_token_file`` names; without one, controls are off. A client proves it holds the
token by ``Authorization: Bearer <token>``, or by a session cookie the login form sets.
The cookie holds a random nonce and its HMAC under the token, so nothing is stored on
the server and a new token ends every session. A form sent with the cookie carries a
CSRF field, the HMAC of the nonce under another label, which another site cannot read;
a bearer request needs none (a browser never adds that header by itself). Pure apart
from reading the token's file.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lane_runner import files
from lane_runner.errors import UsageError

ENV_TOKEN = "LANE_RUNNER_WEB_TOKEN"
COOKIE = "lane_console"
CSRF_FIELD = "csrf"
MAX_TOKEN_BYTES = 4096
#: Shorter tokens are guessed; the file or variable is refused with this said.
MIN_TOKEN_CHARS = 16


def read_token(environ: Mapping[str, str], token_file: str | None) -> str | None:
    """The console's token: the variable, else the file's first line; None for neither.
    A token too short to resist guessing, or a file that cannot be read, is an error
    naming what to fix (the console never starts with controls nobody can use)."""
    found = environ.get(ENV_TOKEN, "").strip()
    where = ENV_TOKEN
    if not found and token_file:
        where = token_file
        try:
            found = files.read(Path(token_file), MAX_TOKEN_BYTES).decode().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(f"web_token_file {token_file}: cannot read it ({error})") from None
    if not found:
        return None
    if len(found) < MIN_TOKEN_CHARS:
        raise UsageError(
            f"the web console's token in {where} is shorter than {MIN_TOKEN_CHARS} "
            "characters; make one with: python3 -c 'import secrets; print(secrets.token_urlsafe())'"
        )
    return found


def loopback(host: str) -> bool:
    """Whether an address the console binds reaches this host only."""
    return ipaddress.ip_address(host).is_loopback


@dataclass(frozen=True)
class Gate:
    """The console's access rules: its token (None: controls off) and whether it listens
    on loopback only (then reading needs nothing)."""

    token: str | None
    loopback_only: bool

    def _sign(self, label: str, nonce: str) -> str:
        key = (self.token or "").encode()
        return hmac.new(key, f"{label}:{nonce}".encode(), hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        """A cookie value for a client that just gave the token."""
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._sign('session', nonce)}"

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def session(self, cookie: str | None) -> str | None:
        """The nonce of a valid session cookie, else None."""
        if self.token is None or not cookie or "." not in cookie:
            return None
        nonce, signature = cookie.rsplit(".", 1)
        expected = self._sign("session", nonce).encode()
        return nonce if hmac.compare_digest(signature.encode(), expected) else None

    def bearer(self, authorization: str | None) -> bool:
        scheme, _, given = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(given.strip())

    def csrf(self, nonce: str) -> str:
        """The form field a session's forms carry."""
        return self._sign("csrf", nonce)

    def csrf_matches(self, nonce: str, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf(nonce).encode())


@dataclass(frozen=True)
class Caller:
    """What one request proved: a bearer token, or a session (its nonce), or nothing."""

    bearer: bool
    nonce: str | None

    @property
    def signed_in(self) -> bool:
        return self.bearer or self.nonce is not None


def caller(gate: Gate, authorization: str | None, cookie: str | None) -> Caller:
    return Caller(gate.bearer(authorization), gate.session(cookie))


def may_read(gate: Gate, who: Caller) -> bool:
    return gate.loopback_only or who.signed_in


def control_refusal(gate: Gate, who: Caller, csrf: str | None) -> str | None:
    """Why a control is refused (None: allowed): no token configured, not signed in, or a
    session's form without its CSRF field."""
    if gate.token is None:
        return (f"controls are off: no token is configured (set {ENV_TOKEN} or "
                "web_token_file, then restart the console)")
    if who.bearer:
        return None
    if who.nonce is None:
        return "sign in with the console's token to use controls"
    if not gate.csrf_matches(who.nonce, csrf):
        return "the form's CSRF field is missing or wrong: reload the page and try again"
    return None


def environment_token(token_file: str | None) -> str | None:
    """``read_token`` of this process's environment."""
    return read_token(os.environ, token_file)
