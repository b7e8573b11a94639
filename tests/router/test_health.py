"""Provider health files: freshness windows, the exactly-one rule, atomic writes, garbage."""

from __future__ import annotations

import json
import logging
import os

import pytest

from lane_runner.router.health import (
    AUTH_FRESH_SECONDS,
    FRESH_SECONDS,
    ProviderHealth,
    excluded_provider,
    read_all,
    read_health,
    record_failure,
    record_success,
)

NOW = 1_700_000_000.0


def down(provider: str, age: float, authenticated: bool = True) -> ProviderHealth:
    return ProviderHealth(provider, "unavailable", authenticated, "usage limit", NOW - age)


@pytest.mark.parametrize(
    ("age", "authenticated", "fresh"),
    [
        (0, True, True),
        (FRESH_SECONDS, True, True),
        (FRESH_SECONDS + 1, True, False),
        (FRESH_SECONDS + 1, False, True),
        (AUTH_FRESH_SECONDS, False, True),
        (AUTH_FRESH_SECONDS + 1, False, False),
        (-60, True, False),  # from the future: not trusted
    ],
)
def test_freshness_windows(age, authenticated, fresh):
    assert down("codex", age, authenticated).fresh(NOW) is fresh


def test_exactly_one_fresh_unavailable_provider_is_excluded():
    provider, reason = excluded_provider([down("codex", 60)], NOW)
    assert provider == "codex"
    assert reason == "is unavailable (usage limit; checked 1 min ago)"


def test_an_auth_failure_says_so_in_the_reason():
    assert excluded_provider([down("claude", 3600, authenticated=False)], NOW) == (
        "claude",
        "is not authenticated (usage limit; checked 60 min ago)",
    )


@pytest.mark.parametrize(
    "healths",
    [
        [],
        [down("codex", 60), down("claude", 60)],  # both down: try anyway, record current errors
        [down("codex", FRESH_SECONDS + 5)],  # stale
        [ProviderHealth("codex", "available", True, "a run succeeded", NOW)],
    ],
)
def test_no_exclusion_unless_exactly_one_is_fresh_and_unavailable(healths):
    assert excluded_provider(healths, NOW) is None


def test_a_stale_failure_does_not_count_towards_both_down():
    healths = [down("codex", 60), down("claude", FRESH_SECONDS + 5)]
    assert excluded_provider(healths, NOW)[0] == "codex"


def test_record_failure_and_success_round_trip(tmp_path):
    directory = tmp_path / "provider-health"
    written = record_failure(directory, "claude", "auth", "Not logged in · Please run /login", NOW)
    assert read_health(directory, "claude") == written
    assert written.authenticated is False and written.state == "unavailable"
    assert excluded_provider(read_all(directory), NOW + 3600)[0] == "claude"
    assert record_success(directory, "claude", NOW + 7200) is True
    cleared = read_health(directory, "claude")
    assert cleared.state == "available" and cleared.checked_at == NOW + 7200
    assert excluded_provider(read_all(directory), NOW + 7200) is None
    assert sorted(os.listdir(directory)) == ["claude.json"]  # no temp file left behind
    assert oct(os.stat(directory / "claude.json").st_mode & 0o777) == "0o600"


def test_capacity_failure_is_authenticated(tmp_path):
    health = record_failure(tmp_path, "codex", "capacity", "You've hit your usage limit", NOW)
    assert health.authenticated is True
    assert json.loads((tmp_path / "codex.json").read_text())["state"] == "unavailable"


def test_success_without_a_failure_writes_nothing(tmp_path):
    assert record_success(tmp_path, "codex") is False
    assert list(tmp_path.iterdir()) == []


def test_a_long_reason_is_bounded(tmp_path):
    health = record_failure(tmp_path, "codex", "capacity", "429 " * 10_000, NOW)
    assert len(health.reason) < 600


def test_unknown_kind_or_provider_is_refused(tmp_path):
    with pytest.raises(ValueError):
        record_failure(tmp_path, "codex", "disk", "?")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        record_failure(tmp_path, "aider", "auth", "?")


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"provider": "codex", "state": "broken", "authenticated": true, "checked_at": 1}',
        b'{"provider": "codex", "state": "unavailable", "authenticated": "no", "checked_at": 1}',
        b'{"provider": "codex", "state": "unavailable", "authenticated": true, "checked_at": "x"}',
        b'{"provider": "claude", "state": "unavailable", "authenticated": true, "checked_at": 1}',
        b" " * (70 * 1024),
    ],
)
def test_garbage_file_is_unknown_and_logged(tmp_path, caplog, content):
    (tmp_path / "codex.json").write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="lane_runner.router.health"):
        assert read_health(tmp_path, "codex") is None
    assert "treated as unknown" in caplog.text


@pytest.mark.parametrize("plant", ["directory", "symlink"])
def test_unreadable_entry_is_unknown_and_logged(tmp_path, caplog, plant):
    target = tmp_path / "elsewhere.json"
    record_failure(tmp_path, "codex", "capacity", "429", NOW)  # valid, were it followed
    os.replace(tmp_path / "codex.json", target)
    if plant == "directory":
        (tmp_path / "codex.json").mkdir()
    else:
        (tmp_path / "codex.json").symlink_to(target)
    with caplog.at_level(logging.WARNING, logger="lane_runner.router.health"):
        assert read_all(tmp_path) == []
    assert "unreadable" in caplog.text


def test_a_misconfigured_provider_is_excluded_with_the_clis_words(tmp_path):
    said = "error: unexpected argument '--bogus' found"
    record_failure(tmp_path, "codex", "misconfigured", said, now=NOW)
    recorded = read_health(tmp_path, "codex")
    assert recorded is not None and recorded.misconfigured and recorded.authenticated
    assert recorded.fresh(NOW + FRESH_SECONDS + 1)  # nobody fixes a host within minutes
    assert not recorded.fresh(NOW + AUTH_FRESH_SECONDS + 1)
    excluded = excluded_provider([recorded], NOW + 60)
    assert excluded == ("codex", f"is misconfigured ({said}; checked 1 min ago)")
    assert record_success(tmp_path, "codex", now=NOW + 90)
    assert read_health(tmp_path, "codex").misconfigured is False


def test_a_file_without_the_misconfigured_field_reads_as_before(tmp_path):
    (tmp_path / "claude.json").write_text(json.dumps({
        "provider": "claude", "state": "unavailable", "authenticated": False,
        "reason": "Not logged in", "checked_at": NOW}))
    recorded = read_health(tmp_path, "claude")
    assert recorded is not None and recorded.misconfigured is False
