"""The end of a command that left nothing running costs no walk of the daemon (issue 46).

Every git call the runner makes is a supervised tree (``run/command.py``), and ending
it walked every thread's children of the daemon and read the environment of each
other child, twice, to find orphans: a quarter of a git call's CPU. Where the command
was born inside its own cgroup, an empty group is an empty tree, and the walk is
skipped; whatever it leaves running is still ended (tests/daemon/test_command_trees.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lane_runner.providers import cgroup, proctree
from lane_runner.run import command

pytestmark = pytest.mark.skipif(
    cgroup.parent() is None, reason="no writable cgroup v2 hierarchy on this host"
)


def _walks_of_the_daemon(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each time a tree lists this process's own children (its orphan search)."""
    seen: list[int] = []
    original = proctree.children

    def counted(pid: int) -> set[int]:
        if pid == os.getpid():
            seen.append(pid)
        return original(pid)

    monkeypatch.setattr(proctree, "children", counted)
    return seen


def test_a_command_that_left_nothing_ends_without_walking_the_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Caught: the shortcut removed (three walks of the daemon's children per call)."""
    walks = _walks_of_the_daemon(monkeypatch)
    said = command.run(["/bin/echo", "done"], cwd=tmp_path, env={"PATH": "/bin"}, timeout=30)
    assert said.returncode == 0 and said.stdout == "done\n"
    assert walks == []


def test_a_command_that_left_a_process_is_walked_and_the_process_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Caught: the shortcut taken while the group still has a member."""
    walks = _walks_of_the_daemon(monkeypatch)
    pid_file = tmp_path / "left.pid"
    script = f'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "{pid_file}"'
    said = command.run(["/bin/sh", "-c", script], cwd=tmp_path, env={"PATH": "/bin:/usr/bin"},
                       timeout=30)
    assert said.returncode == 0
    assert walks, "the daemon's children were not searched for what the command left"
    state = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    assert not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z"
