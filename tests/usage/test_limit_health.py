"""Provider health under a usage limit whose reset is known (pure, on files in tmp_path):
unavailable exactly until the reset, routed around meanwhile, waited for when every
provider is so limited."""

from __future__ import annotations

from pathlib import Path

from lane_runner.router import health

NOW = 1_796_168_337.0  # 2026-12-01 23:38:57 UTC
HOUR = 3600.0


def test_a_limit_is_fresh_until_its_reset_however_far(tmp_path: Path) -> None:
    recorded = health.record_limit(tmp_path, "claude", "You've hit your weekly limit",
                                   NOW + 50 * HOUR, NOW)
    [read] = health.read_all(tmp_path)
    assert read == recorded and read.until == NOW + 50 * HOUR
    assert read.fresh(NOW + 49 * HOUR) and not read.fresh(NOW + 50 * HOUR)
    assert health.limit_words(read) == "usage limit until 2026-12-04 01:38 UTC"


def test_automatic_routing_goes_around_a_limited_provider(tmp_path: Path) -> None:
    health.record_limit(tmp_path, "claude", "resets 8pm", NOW + 2 * HOUR, NOW)
    avoid = health.exclusion_for("cli-auto", health.read_all(tmp_path), NOW + HOUR)
    assert avoid is not None and avoid[0] == "claude"
    assert "usage limit until 2026-12-02 01:38 UTC" in avoid[1]  # another day: dated
    assert health.exclusion_for("cli-claude-low", health.read_all(tmp_path), NOW) is None
    assert health.exclusion_for("cli-auto", health.read_all(tmp_path), NOW + 3 * HOUR) is None


def test_a_reset_the_same_day_is_said_as_a_time(tmp_path: Path) -> None:
    earlier = NOW - 10 * HOUR  # 13:38 UTC
    said = health.record_limit(tmp_path, "claude", "resets 8pm", earlier + 6.5 * HOUR, earlier)
    assert health.limit_words(said) == "usage limit until 20:08 UTC"


def test_a_task_waits_only_when_every_provider_names_its_reset(tmp_path: Path) -> None:
    providers = ("codex", "claude")
    health.record_limit(tmp_path, "claude", "resets 8pm", NOW + 2 * HOUR, NOW)
    assert health.limit_wait(providers, health.read_all(tmp_path), NOW) is None
    health.record_failure(tmp_path, "codex", "capacity", "429 Too Many Requests", NOW)
    assert health.limit_wait(providers, health.read_all(tmp_path), NOW) is None  # no reset
    health.record_limit(tmp_path, "codex", "try again at 3:28 AM", NOW + 3 * HOUR, NOW)
    wait = health.limit_wait(providers, health.read_all(tmp_path), NOW)
    assert wait is not None and wait[0] == NOW + 2 * HOUR
    assert "claude: usage limit until 2026-12-02 01:38 UTC" in wait[1]
    assert health.limit_wait(providers, health.read_all(tmp_path), NOW + 2 * HOUR) is None
    health.record_success(tmp_path, "claude", NOW)
    assert health.limit_wait(providers, health.read_all(tmp_path), NOW) is None
