"""A run's settings slices (run/slices.py): each field from its own key, none from a key a
reload changes under a running run (``READ_LIVE``), and the run's slices those of the
configuration it was claimed under."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from lane_runner import config
from lane_runner.config import Config
from lane_runner.config.keys import KEYS_BY_NAME, RESTART_KEYS
from lane_runner.run.slices import (
    READ_LIVE,
    Backoff,
    Budgets,
    FollowUps,
    Heartbeats,
    RunSettings,
    SlotWait,
    Supervisor,
    Worker,
)


class Reading:
    """A configuration that notes every key read from it."""

    def __init__(self, cfg: Config) -> None:
        self._cfg, self.read = cfg, set[str]()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._cfg, name)


def distinct(tmp_path: Path) -> Config:
    """Every number a slice reads a different value, so a key read for another shows."""
    return config.load(tmp_path, {}).replace(
        heartbeat_interval=3, lease_ttl=41, progress_note_interval=301,
        cooldown_limit=5, cooldown_base=61, cooldown_max=3601,
        failure_limit=7, failure_backoff_base=31, failure_backoff_max=1801,
        stall_timeout=601, tool_stall_timeout=1201, busy_cpu_percent=37, closing_grace=11,
        log_rotate_bytes=123457, max_cost_usd=9.5, max_tokens=777, goal_margin=91,
        min_free_disk_mb=513, max_runtime=7201, push="on_done", push_remote="upstream",
        commit_author="Ada <ada@example.org>", provider_full="fallback",
        worker_env=["LANG", "TZ"], simulate=True,
    )


def test_each_field_comes_from_its_own_key(tmp_path: Path) -> None:
    """Caught: Backoff.of passing cooldown_max as cooldown_base; Heartbeats.of taking
    lease_ttl for the interval; Supervisor.of busy_cpu as a percent, not a fraction."""
    cfg = distinct(tmp_path)
    settings = RunSettings.of(cfg)
    assert settings.heartbeats == Heartbeats(3, 41, 301)
    assert settings.backoff == Backoff(5, 61, 3601, 7, 31, 1801)
    assert settings.budgets == Budgets(9.5, 777, cfg.daily_budget_usd, cfg.prices)
    assert settings.slot_wait == SlotWait(True, 3)
    assert settings.supervisor == Supervisor(
        True, 3, 601, 1201, 0.37, 11, 123457, None, False, ())
    assert settings.worker == Worker(None, ("LANG", "TZ"), None, cfg.hooks)
    assert settings.follow_ups == FollowUps("on_done", "upstream", settings.worker)
    assert (settings.goal_margin, settings.commit_author, settings.min_free_disk_mb,
            settings.max_runtime) == (91, "Ada <ada@example.org>", 513, 7201)


def test_a_slot_wait_waits_unless_the_configuration_falls_back(tmp_path: Path) -> None:
    """Caught: fallback read as ``provider_full != "wait"`` (or always True)."""
    cfg = config.load(tmp_path, {})
    assert SlotWait.of(cfg.replace(provider_full="wait")).fallback is False
    assert SlotWait.of(cfg.replace(provider_full="fallback")).fallback is True


def test_no_slice_reads_a_key_a_reload_changes_under_a_running_run(tmp_path: Path) -> None:
    """Caught: a slice taking a provider's cap (``max_running_*``) or the breaker's
    threshold at the claim, which the run meets live through the daemon's parts."""
    reading = Reading(distinct(tmp_path))
    RunSettings.of(cast(Config, reading))
    assert reading.read, "the slices read the configuration"
    assert not reading.read & set(READ_LIVE)


def test_the_live_keys_are_keys_a_reload_applies() -> None:
    """Caught: a live key misspelt (no key) or one that waits for a restart."""
    assert set(READ_LIVE) <= set(KEYS_BY_NAME)
    assert not set(READ_LIVE) & set(RESTART_KEYS)
    assert {key for key in READ_LIVE if key.startswith("max_running_")} == {
        "max_running_codex", "max_running_claude", "max_running_opencode",
        "max_running_gemini"}


def test_the_slices_of_a_claim_stay_when_the_configuration_is_replaced(
    tmp_path: Path,
) -> None:
    """A reload builds a new Config; the slices taken before it are values, not views.
    Caught: a slice holding the Config and reading it at each use."""
    cfg = distinct(tmp_path)
    settings = RunSettings.of(cfg)
    later = cfg.replace(heartbeat_interval=9, commit_author="Bob <bob@example.org>",
                        cooldown_base=5)
    assert RunSettings.of(later) != settings
    assert settings == RunSettings.of(cfg)
    assert settings.heartbeats.interval == 3
    assert settings.commit_author == "Ada <ada@example.org>"


def test_the_documentation_says_what_a_running_run_meets_reloaded() -> None:
    """docs/configuration.md's "What a reload changes" names the live keys among those a
    reload applies at once. Caught: a key added to READ_LIVE the page does not name."""
    page = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    section = page.split("## What a reload changes", 1)[1].split("\n## ", 1)[0]
    at_once = section.split("- **At once**", 1)[1].split("\n- **", 1)[0]
    assert "READ_LIVE" in at_once
    families = {"max_running_": "`max_running_<provider>`", "breaker_": "`breaker_*`"}
    for key in READ_LIVE:
        named = [shown for prefix, shown in families.items() if key.startswith(prefix)]
        assert named and named[0] in at_once, key
