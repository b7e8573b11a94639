"""How big each benchmark is: the full run (~20 min on 2 cores) and a seconds-long smoke run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    name: str
    dispatch_samples: int
    poll_samples: int
    poll_interval: float
    concurrencies: tuple[int, ...]
    tasks_per_run: int
    throughput_rounds: int
    journal_commits: int
    recovery_sizes: tuple[int, int]
    stream_bytes: int
    idle_seconds: float
    unrelated_processes: int
    supervised_runs: int
    pod_runners: tuple[int, ...]
    pod_burst: int
    pod_trickle: int
    pod_rounds: int
    board_sizes: tuple[int, int]
    claim_samples: int
    death_runs: int
    fleet_runners: int
    fleet_slots: int
    fleet_processes: int
    fleet_tasks: int
    fleet_heartbeat: float
    fleet_run: tuple[float, float]
    fleet_warmup: float
    fleet_window: float
    campaign_kills: int
    campaign_seconds: float
    campaign_backlog: int
    console_clients: int
    large_repo: tuple[int, int]  # files, bytes
    large_tasks: int
    large_rounds: int
    turn_tasks: int  # goal tasks of three turns (bench/figures/turns.py)
    verify_tasks: int  # per setup (bench/figures/verify_cost.py)
    verify_rounds: int


FULL = Scale(
    name="full",
    dispatch_samples=40,
    poll_samples=12,
    poll_interval=5.0,
    concurrencies=(1, 4, 8),
    tasks_per_run=32,
    throughput_rounds=5,
    journal_commits=200,
    recovery_sizes=(1_000, 10_000),
    stream_bytes=1 << 30,
    idle_seconds=60.0,
    unrelated_processes=5_000,
    supervised_runs=12,
    pod_runners=(1, 4, 16),
    pod_burst=1000,
    pod_trickle=100,
    pod_rounds=3,
    board_sizes=(1_000, 100_000),
    claim_samples=200,
    death_runs=3,
    fleet_runners=200,
    fleet_slots=4,
    fleet_processes=8,
    fleet_tasks=6000,
    fleet_heartbeat=20.0,
    fleet_run=(20.0, 60.0),
    fleet_warmup=60.0,
    fleet_window=120.0,
    campaign_kills=5000,
    campaign_seconds=900.0,
    campaign_backlog=6,
    console_clients=100,
    large_repo=(50_000, 500_000_000),
    large_tasks=8,
    large_rounds=3,
    turn_tasks=6,
    verify_tasks=40,
    verify_rounds=4,
)

SMOKE = Scale(
    name="smoke",
    dispatch_samples=3,
    poll_samples=2,
    poll_interval=0.5,
    concurrencies=(1, 2),
    tasks_per_run=3,
    throughput_rounds=1,
    journal_commits=5,
    recovery_sizes=(10, 50),
    stream_bytes=4 << 20,
    idle_seconds=1.0,
    unrelated_processes=20,
    supervised_runs=2,
    pod_runners=(1, 2),
    pod_burst=20,
    pod_trickle=5,
    pod_rounds=1,
    board_sizes=(10, 100),
    claim_samples=5,
    death_runs=1,
    fleet_runners=4,
    fleet_slots=2,
    fleet_processes=2,
    fleet_tasks=60,
    fleet_heartbeat=0.5,
    fleet_run=(1.0, 2.0),
    fleet_warmup=1.0,
    fleet_window=3.0,
    campaign_kills=0,  # none: a campaign's starts and stops alone take a minute
    campaign_seconds=0.0,
    campaign_backlog=0,
    console_clients=5,
    large_repo=(400, 2_000_000),
    large_tasks=4,
    large_rounds=1,
    turn_tasks=1,
    verify_tasks=2,
    verify_rounds=1,
)
