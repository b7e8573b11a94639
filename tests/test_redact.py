"""Secrets never leave a URL the runner prints or stores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lane_runner import redact

SECRET = "S3cr3tPlanted"


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


# -- the gate: free text ------------------------------------------------------------

#: Each form a secret takes in text, ``{}`` where the secret goes.
FORMS = [
    "https://bot:{}@git.example/r.git",
    "git clone bot:{}@git.example:org/r.git",
    "GET /v1?api_key={}&region=eu",
    "&token={}",
    "access_token={}",
    "password = {}",
    "key={}",
    "auth=Basic {}",
    "Authorization: Bearer {}",
    "proxy-authorization:basic {}",
    '{{"api_key": "{}"}}',
    "Bearer A{}",
    "ghp_{}",
    "gho_{}",
    "github_pat_{}",
    "sk-{}",
    "sk-ant-api03-{}",
    "xoxb-{}",
    "xoxp-{}",
]
#: Secrets as they come: long enough to be one (a token has ten characters or more).
SECRETS = st.text(alphabet="ABCDEFGHJKabcdefghjk0123456789", min_size=12, max_size=40)
#: Text around a secret, from characters that make up the forms (none of the secret's),
#: to run into them.
AROUND = st.text(alphabet="xyz :/@?&=_-.\"'\n", max_size=30)


@pytest.mark.parametrize("form", FORMS)
def test_each_form_of_secret_is_hidden(form: str) -> None:
    shown = redact.text(f"the router said: {form.format(SECRET)} (403)")
    assert SECRET not in shown and "***" in shown, shown


@given(st.sampled_from(FORMS), SECRETS, AROUND, AROUND)
def test_no_planted_secret_survives(form: str, secret: str, before: str, after: str) -> None:
    shown = redact.text(f"{before} {form.format(secret)}\n{after}")
    assert secret not in shown


@given(st.text(alphabet="ab1A:/@?&=#_-. \"'\nhtpskeyBasicrBearothn", max_size=120))
def test_the_gate_is_idempotent(text: str) -> None:
    once = redact.text(text)
    assert redact.text(once) == once


@given(st.lists(st.sampled_from(FORMS), max_size=4), SECRETS, AROUND)
def test_the_gate_is_idempotent_on_secrets(forms: list[str], secret: str, around: str) -> None:
    once = redact.text(around.join(form.format(secret) for form in forms))
    assert redact.text(once) == once


@pytest.mark.parametrize(
    "kept",
    ["input_tokens=1280 output_tokens=3", "git@github.com:org/r.git", "Basic authentication "
     "failed", "Bearer token missing", "mail bob@example.com", "error: invalid api key: log in",
     "sk-learn", "tokens: 1,280"],
)
def test_what_only_looks_like_a_secret_is_kept(kept: str) -> None:
    assert redact.text(kept) == kept


def test_a_json_document_is_redacted_in_every_string() -> None:
    document = {"reason": f"?token={SECRET}", "runs": [{"why": f"u:{SECRET}@h.example"}], "n": 3}
    assert SECRET not in repr(redact.document(document))
    assert redact.document(document)["n"] == 3


def test_a_cut_never_leaves_part_of_a_token() -> None:
    """Redacted before the cut: wherever the cut falls, no part of the token is left."""
    text = f"the hook said: export GH_TOKEN ghp_{SECRET}{SECRET} done"
    for limit in range(len(text) + 2):
        assert SECRET[:4] not in redact.shown(text, limit), limit
