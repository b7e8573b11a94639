"""An attempt's CPU time, as the liveness clock reads it: from its cgroup's ``cpu.stat``
(every member, a descendant that left the tree included), else from the tree's ``/proc``."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from lane_runner.providers import cgroup
from lane_runner.providers.proctree import TOKEN_VARIABLE, ProcessTree

#: A grandchild that burns 0.3 s of CPU (its own clock, not the wall's), says so, and waits.
BURN = """
import subprocess, sys
code = (
    "import sys, time\\n"
    "while time.process_time() < 0.3: pass\\n"
    "print('burnt', flush=True)\\n"
    "sys.stdin.read()\\n"
)
subprocess.run([sys.executable, "-c", code])
"""


def _burn(argv_prefix: list[str]) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [*argv_prefix, sys.executable, "-c", BURN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={TOKEN_VARIABLE: uuid.uuid4().hex, "PATH": "/usr/bin:/bin"},
    )
    assert child.stdout is not None and child.stdout.readline() == "burnt\n"
    return child


def test_cpu_stat_usage_is_read_in_seconds() -> None:
    assert cgroup.cpu_usage("usage_usec 2500000\nuser_usec 2000000\n") == 2.5
    assert cgroup.cpu_usage("user_usec 1\n") is None


@pytest.mark.skipif(cgroup.parent() is None, reason="no writable cgroup v2 hierarchy here")
def test_the_attempt_cgroup_counts_a_grandchild_s_cpu() -> None:
    group = cgroup.AttemptGroup.create(uuid.uuid4().hex)
    assert group is not None
    child = _burn(group.launcher([]))
    try:
        tree = ProcessTree(child, "unused", group)  # type: ignore[arg-type]
        found = tree.cpu_seconds()
        assert found is not None and found >= 0.3
    finally:
        group.kill()
        child.wait()
        group.remove()


def test_without_a_cgroup_the_tree_s_processes_are_counted() -> None:
    child = _burn([])
    try:
        tree = ProcessTree(child, "unused")  # type: ignore[arg-type]
        tree.refresh()
        found = tree.cpu_seconds()
        assert found is not None and found >= 0.3
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
