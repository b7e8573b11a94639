"""The pure rules under the operator controls: memory readings, provider slots, stuck runs,
and the pause file's reading of what it finds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson

from lane_runner.service import memory, pause, status, stuck
from lane_runner.service.activity import ActiveRun, Activity, RunWarning
from lane_runner.service.slots import ProviderSlots

MEMINFO = "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    2048000 kB\n"


def test_mem_available_reads_kib_as_bytes() -> None:
    assert memory.mem_available(MEMINFO) == 2048000 * 1024
    assert memory.mem_available("MemTotal: 1 kB\n") is None


def test_cgroup_room_discounts_inactive_page_cache() -> None:
    stat = "anon 100\ninactive_file 300\nactive_file 5\n"
    assert memory.cgroup_room("1000\n", "900\n", stat) == 400
    assert memory.cgroup_room("max\n", "900\n", stat) is None
    assert memory.cgroup_room("1000\n", "5000\n", "") == 0


def test_shortage_names_the_threshold_and_turns_off_at_zero() -> None:
    low = memory.Reading(100 << 20, "cgroup system.slice")
    why = memory.shortage(low, 256)
    assert why is not None and "100 MiB" in why and "cgroup system.slice" in why
    assert memory.shortage(low, 0) is None
    assert memory.shortage(memory.Reading(300 << 20, "MemAvailable"), 256) is None
    assert memory.shortage(None, 256) is None  # unknown: fail open


def test_slots_cap_one_provider_and_count_room() -> None:
    caps = {"codex": 1, "claude": 0, "opencode": 1, "gemini": 1}
    slots = ProviderSlots(lambda: caps)
    assert slots.acquire("codex") and not slots.acquire("codex")
    assert slots.acquire("claude") and slots.acquire("claude")  # 0: uncapped
    assert slots.room(3) is None  # an uncapped provider: concurrency is the bound
    caps["claude"] = 2
    assert slots.room(3) == 2  # opencode's and gemini's free slots
    assert slots.room(4) == 1  # a claimed run holding no slot takes the room first
    slots.release("codex")
    assert slots.room(2) == 3 and slots.acquire("codex")
    snapshot = slots.snapshot()
    assert snapshot["providers"] == {
        "codex": {"running": 1, "cap": 1},
        "claude": {"running": 2, "cap": 2},
        "opencode": {"running": 0, "cap": 1},
        "gemini": {"running": 0, "cap": 1},
    }


def test_a_provider_not_installed_leaves_the_room_the_others_caps_make() -> None:
    """A host with codex and claude only, both capped: the room is theirs, not unbounded
    because opencode and gemini, which cannot run here, have no cap."""
    caps = {"codex": 1, "claude": 2}
    slots = ProviderSlots(lambda: caps, lambda: ("codex", "claude"))
    assert slots.acquire("codex")
    assert slots.room(1) == 2
    assert ProviderSlots(lambda: caps).room(1) is None  # every provider installed


def test_stuck_assess_warns_at_the_fraction_of_each_limit() -> None:
    run = ActiveRun("work", "t-1", 1, started_at=0.0, last_event_at=50.0)
    kinds = [w.kind for w in stuck.assess(run, 100.0, stall_timeout=100, max_runtime=200,
                                          fraction=0.5)]
    assert kinds == [stuck.QUIET, stuck.LONG]
    assert stuck.assess(run, 99.0, stall_timeout=100, max_runtime=200, fraction=0.5) == []
    assert stuck.assess(run, 1e9, stall_timeout=100, max_runtime=200, fraction=0) == []
    waiting = dataclasses.replace(run, waiting_for="codex")
    kinds = [w.kind for w in stuck.assess(waiting, 100.0, stall_timeout=100, max_runtime=1e6,
                                          fraction=0.5)]
    assert kinds == []  # a run waiting for a slot has no provider to be quiet


def test_pause_file_round_trip_and_garbage_still_pauses(tmp_path: Path) -> None:
    path = tmp_path / "paused.json"
    assert pause.read(path) is None
    pause.pause(path, "upgrade", "ops")
    found = pause.read(path)
    assert found is not None and (found.reason, found.by) == ("upgrade", "ops")
    path.write_bytes(b"\xff not json")
    garbled = pause.read(path)
    assert garbled is not None and "resume" in garbled.reason
    assert pause.resume(path) and not pause.resume(path)


def test_the_activity_snapshot_is_a_copy_and_status_json_keeps_its_fields() -> None:
    """``status.json``'s ``active`` entries are what the dicts of before were, field for
    field (``lane-runner status`` of an older or newer runner reads them), and a snapshot
    never changes under the daemon's reader when a worker updates its run."""
    activity = Activity()
    activity.start("work", "t-1", 7, "/home/logs/t-1.log", 60.0)
    activity.update(7, provider="codex", warnings=[RunWarning(stuck.QUIET, "no event")])
    [run] = activity.snapshot()
    activity.update(7, provider="claude", warnings=[])
    published = status.document(
        started_at=1.0, node="n", concurrency=1, active=[run], runs_finished=0,
        pending_finalizations=0, metrics_port=None, metrics_address=None, paused=None,
        hold=None, providers={}, memory=None,
    )
    assert orjson.loads(orjson.dumps(published))["active"] == [{
        "board": "work", "task_id": "t-1", "run_id": 7, "started_at": run.started_at,
        "provider": "codex", "model": None, "effort": None, "last_heartbeat_at": None,
        "last_event_at": None, "log_path": "/home/logs/t-1.log", "pid": None,
        "max_runtime": 60.0, "waiting_for": None, "ending": None,
        "warnings": [{"kind": "quiet", "message": "no event"}], "clock": None,
        "stall_limit": None, "busy_at": None, "turn": None, "session_id": None,
        "tokens": 0, "cost_usd": 0.0, "role": None, "review_run": None,
    }]
