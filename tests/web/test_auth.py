"""The console's access rules, pure: the token, sessions, CSRF fields, the listen address."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lane_runner.config import listen_address
from lane_runner.errors import UsageError
from lane_runner.web import auth

TOKEN = "0123456789abcdef-token"


def test_the_variable_wins_over_the_file_and_a_short_token_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("from-the-file-0123456789\n")
    assert auth.read_token({auth.ENV_TOKEN: TOKEN}, str(file)) == TOKEN
    assert auth.read_token({}, str(file)) == "from-the-file-0123456789"
    assert auth.read_token({}, None) is None
    with pytest.raises(UsageError, match="shorter than 16"):
        auth.read_token({auth.ENV_TOKEN: "short"}, None)
    with pytest.raises(UsageError, match="cannot read it"):
        auth.read_token({}, str(tmp_path / "missing"))


def test_a_session_is_the_tokens_and_ends_with_a_new_token() -> None:
    gate = auth.Gate(TOKEN, loopback_only=True)
    cookie = gate.new_session()
    nonce = gate.session(cookie)
    assert nonce is not None and cookie.startswith(nonce)
    assert auth.Gate("another-token-0123456789", True).session(cookie) is None
    assert gate.session(nonce + ".0000") is None and gate.session(nonce) is None
    assert auth.Gate(None, True).session(cookie) is None


@given(st.text(max_size=40))
def test_a_forged_cookie_is_no_session(forged: str) -> None:
    assert auth.Gate(TOKEN, True).session(forged) is None


def test_a_controls_refusal_says_why() -> None:
    gate = auth.Gate(TOKEN, loopback_only=True)
    nonce = gate.session(gate.new_session())
    assert nonce is not None
    session = auth.Caller(bearer=False, nonce=nonce)
    assert auth.control_refusal(gate, auth.Caller(True, None), None) is None
    assert auth.control_refusal(gate, session, gate.csrf(nonce)) is None
    assert "CSRF" in (auth.control_refusal(gate, session, None) or "")
    assert "CSRF" in (auth.control_refusal(gate, session, gate.csrf("other")) or "")
    assert "sign in" in (auth.control_refusal(gate, auth.Caller(False, None), None) or "")
    off = auth.control_refusal(auth.Gate(None, True), auth.Caller(True, None), None)
    assert off is not None and auth.ENV_TOKEN in off


def test_reading_is_open_on_loopback_only() -> None:
    anyone = auth.Caller(False, None)
    assert auth.may_read(auth.Gate(None, loopback_only=True), anyone)
    assert not auth.may_read(auth.Gate(TOKEN, loopback_only=False), anyone)
    assert auth.may_read(auth.Gate(TOKEN, loopback_only=False), auth.Caller(True, None))
    assert auth.loopback("127.0.0.1") and auth.loopback("::1")
    assert not auth.loopback("0.0.0.0") and not auth.loopback("::")


def test_a_bearer_needs_the_exact_token() -> None:
    gate = auth.Gate(TOKEN, True)
    assert gate.bearer(f"Bearer {TOKEN}") and gate.bearer(f"bearer {TOKEN}")
    assert not gate.bearer(f"Bearer {TOKEN}x") and not gate.bearer(f"Basic {TOKEN}")
    assert not gate.bearer(None) and not auth.Gate(None, True).bearer("Bearer ")


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:8480", ("127.0.0.1", 8480)), ("[::1]:80", ("::1", 80)),
     ("0.0.0.0:1", ("0.0.0.0", 1))],
)
def test_a_listen_address(text: str, address: tuple[str, int]) -> None:
    assert listen_address(text) == address


@pytest.mark.parametrize("text", ["localhost:8480", "127.0.0.1", "127.0.0.1:0", ":8480",
                                  "127.0.0.1:70000", "127.0.0.1:x"])
def test_a_bad_listen_address_says_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        listen_address(text)
