"""Secrets never leave a URL the runner prints or stores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lane_runner import redact

SECRET = "s3cr3t-Planted"


def test_the_password_is_hidden_and_the_user_name_kept() -> None:
    assert redact.url(f"http://alice:{SECRET}@router:8080/v1") == "http://alice:***@router:8080/v1"


def test_secret_query_values_are_hidden() -> None:
    shown = redact.url(f"https://router/v1?api_key={SECRET}&region=eu")
    assert SECRET not in shown and "region=eu" in shown


def test_urls_inside_free_text_are_redacted() -> None:
    message = f"connect failed for 'postgresql://bob:{SECRET}@db/x': refused"
    assert redact.text(message) == "connect failed for 'postgresql://bob:***@db/x': refused"


def test_a_url_without_secrets_is_unchanged() -> None:
    assert redact.url("http://127.0.0.1:9/route?x=1") == "http://127.0.0.1:9/route?x=1"
    assert redact.url("not a url") == "not a url"


@given(st.text(alphabet=st.characters(blacklist_characters="@/:?#[]%\x00"), min_size=1))
def test_no_password_survives(password: str) -> None:
    assert redact.url(f"http://u:{password}@h.example/p") == "http://u:***@h.example/p"


@pytest.mark.parametrize(
    ("name", "hidden"),
    [("ANTHROPIC_API_KEY", True), ("ANTHROPIC_AUTH_TOKEN", True), ("CORP_LLM_KEY", True),
     ("AWS_SECRET_ACCESS_KEY", True), ("Authorization", True), ("ANTHROPIC_BASE_URL", False),
     ("AWS_REGION", False), ("model_providers.corp.env_key", False)],
)
def test_a_setting_named_as_a_credential_is_hidden(name: str, hidden: bool) -> None:
    value = "http://user:pw@gw.example/v1"
    assert redact.setting(name, value) == ("***" if hidden else "http://user:***@gw.example/v1")
