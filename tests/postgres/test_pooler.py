"""Pods through PgBouncer in transaction mode: real daemons, one board, every task once.

Two pods reach the server only through a PgBouncer of the test's own (bench/pgbouncer.py)
with ``board_pooler = "transaction"`` and a budget of one connection each, so they
wake by the bounded poll; a third pod connects directly and listens. Together they
finish every task exactly once, and the pooled pods do their share.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import pgbouncer as bouncer

from .conftest import Fleet

TASKS = 60
SLOW = "[sim:slow:0.1:3]"
SERVER_POOL = 4


@pytest.fixture
def pooler(tmp_path: Path, fleet: Fleet) -> Iterator[str]:
    why = bouncer.missing()
    if why:
        pytest.skip(why)
    with bouncer.running(tmp_path / "pgbouncer", fleet.url, pool=SERVER_POOL) as port:
        yield bouncer.through(fleet.url, port)


def test_pods_through_pgbouncer_finish_every_task_once(fleet: Fleet, pooler: str) -> None:
    pooled = [fleet.pod(name, board_url=pooler) for name in ("pod-a", "pod-b")]
    for pod in pooled:
        pod.write_config(board_pooler="transaction", board_connections=1)
    direct = fleet.pod("pod-c")
    fleet.add(TASKS, slow_every=5, slow=SLOW)
    daemons = [pod.start("--until-idle") for pod in [*pooled, direct]]
    for daemon in daemons:
        assert daemon.wait(timeout=240) == 0, "\n".join(p.log_tail() for p in fleet.pods)
    assert fleet.done() == TASKS
    fleet.assert_done_exactly_once()
    nodes = {run.node for task in fleet.tasks() for run in fleet.board.runs(task.id)}
    assert {pod.node for pod in pooled} <= nodes, "both pooled pods should have claimed"
