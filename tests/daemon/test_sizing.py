"""``concurrency = 0`` follows this runner's cgroup v2 limits (``memory.max``, ``cpu.max``
of its cgroup and every ancestor), else the node's: cgroup trees written under tmp_path
as the kernel shows them, read by ``read_limits`` and sized by ``derived_concurrency``."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner.service import memory, sizing
from lane_runner.service.sizing import Limits

GIB = 1 << 30
#: A 24 GiB node.
MEMINFO = "MemTotal:       25165824 kB\nMemFree:         1048576 kB\nMemAvailable: 1 kB\n"
#: A container's cgroup, as a kubelet nests it under the pod's.
NESTED = "kubepods.slice/kubepods-burstable.slice/pod-1.slice/cri-containerd-2.scope"


def node(tmp_path: Path, files: dict[str, dict[str, str]], cgroup: str = NESTED) -> Path:
    """A ``/proc`` and ``/sys/fs/cgroup`` under ``tmp_path``: this process in ``cgroup``,
    and ``files`` per cgroup directory (``memory.max``, ``cpu.max``)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "meminfo").write_text(MEMINFO)
    (tmp_path / "self-cgroup").write_text(f"0::/{cgroup}\n")
    root = tmp_path / "cgroup"
    (root / cgroup).mkdir(parents=True)
    for directory, contents in files.items():
        for name, text in contents.items():
            (root / directory / name).write_text(text + "\n")
    return root


def limits(tmp_path: Path, root: Path, node_cpus: int = 8) -> Limits:
    return sizing.read_limits(meminfo=tmp_path / "meminfo", self_cgroup=tmp_path / "self-cgroup",
                              root=root, node_cpus=node_cpus)


def test_a_pods_limits_size_the_slots_not_the_node(tmp_path: Path) -> None:
    """8 GiB and 4 CPUs on the container's cgroup of a 24 GiB, 8-CPU node: 4 slots of
    2 GiB (the node alone would give 12)."""
    root = node(tmp_path, {NESTED: {"memory.max": str(8 * GIB), "cpu.max": "400000 100000"}})
    found = limits(tmp_path, root)
    assert found == Limits(memory=8 * GIB, cpus=4.0)
    assert sizing.derived_concurrency(found, 2048) == 4


def test_the_lowest_limit_of_the_ancestors_wins(tmp_path: Path) -> None:
    """The container's cgroup is unlimited, its pod's is not (memory), and a CPU quota
    sits higher still: each is bounded by the lowest on the way up."""
    pod = "kubepods.slice/kubepods-burstable.slice/pod-1.slice"
    root = node(tmp_path, {
        NESTED: {"memory.max": "max", "cpu.max": "max 100000"},
        pod: {"memory.max": str(6 * GIB), "cpu.max": "max 100000"},
        "kubepods.slice": {"memory.max": str(20 * GIB), "cpu.max": "150000 100000"},
    })
    found = limits(tmp_path, root)
    assert found == Limits(memory=6 * GIB, cpus=1.5)
    assert sizing.derived_concurrency(found, 2048) == 3  # memory 3, CPU 3


def test_a_cpu_quota_below_the_memory_bounds_the_slots(tmp_path: Path) -> None:
    """Plenty of memory, one CPU: 2 slots, not 8."""
    root = node(tmp_path, {NESTED: {"memory.max": str(16 * GIB), "cpu.max": "100000 100000"}})
    assert sizing.derived_concurrency(limits(tmp_path, root), 2048) == 2


def test_without_limits_the_node_sizes_the_slots(tmp_path: Path) -> None:
    """No limits on the way up (``max``, or the controller's file absent): the node's
    24 GiB and its 4 CPUs."""
    root = node(tmp_path, {NESTED: {"memory.max": "max", "cpu.max": "max 100000"}})
    found = limits(tmp_path, root, node_cpus=4)
    assert found == Limits(memory=24 * GIB, cpus=4.0)
    assert sizing.derived_concurrency(found, 2048) == 8
    bare = node(tmp_path / "bare", {}, cgroup="user.slice/session-1.scope")
    assert limits(tmp_path / "bare", bare, node_cpus=64) == Limits(memory=24 * GIB, cpus=64.0)


def test_nothing_readable_is_the_old_default(tmp_path: Path) -> None:
    found = sizing.read_limits(meminfo=tmp_path / "none", self_cgroup=tmp_path / "none",
                               root=tmp_path, node_cpus=2)
    assert found == Limits(memory=None, cpus=2.0)  # no /proc: the CPUs alone
    assert sizing.derived_concurrency(found, 2048) == 4
    assert sizing.derived_concurrency(Limits(None, None), 2048) == sizing.UNKNOWN


@pytest.mark.parametrize(("found", "slots"), [
    (Limits(1 * GIB, 8.0), 1),      # under one run's memory: still one slot
    (Limits(1 << 40, 64.0), sizing.MAX_DERIVED),
    (Limits(64 * GIB, 0.5), 1),     # half a CPU: one slot
    (Limits(None, 3.0), 6),
    (Limits(10 * GIB, None), 5),
])
def test_the_slots_are_bounded(found: Limits, slots: int) -> None:
    assert sizing.derived_concurrency(found, 2048) == slots


@pytest.mark.parametrize(("text", "cpus"), [
    ("400000 100000", 4.0), ("max 100000", None), ("50000 100000\n", 0.5), ("", None),
    ("x 100000", None), ("100000 0", None),
])
def test_cpu_max_reads_the_quota(text: str, cpus: float | None) -> None:
    assert sizing.cpu_max(text) == cpus


def test_mem_total_reads_meminfo() -> None:
    assert sizing.mem_total(MEMINFO) == 24 * GIB
    assert sizing.memory_max("max\n") is None and sizing.memory_max("1024\n") == 1024


def test_under_a_cgroup_namespace_the_limits_are_the_roots(tmp_path: Path) -> None:
    """A container's usual view: it is at ``/`` of its own cgroup tree, whose files are
    its limits (the loop that stopped below the root read none of them)."""
    root = node(tmp_path, {".": {"memory.max": str(4 * GIB), "cpu.max": "200000 100000"}},
                cgroup="")
    assert limits(tmp_path, root) == Limits(memory=4 * GIB, cpus=2.0)


def test_the_memory_guard_reads_the_room_of_the_same_chain(tmp_path: Path) -> None:
    """``min_available_memory_mb``'s room: the pod's limit under a namespace, and the
    lowest room of a nested cgroup's ancestors, named."""
    root = node(tmp_path, {".": {"memory.max": str(4 * GIB), "memory.current": str(3 * GIB),
                                 "memory.stat": f"anon 1\ninactive_file {GIB // 2}"}},
                cgroup="")
    assert memory._cgroup_reading(tmp_path / "self-cgroup", root) == memory.Reading(
        GIB + GIB // 2, "cgroup /")
    pod = "kubepods.slice/kubepods-burstable.slice/pod-1.slice"
    nested = node(tmp_path / "nested", {
        NESTED: {"memory.max": "max", "memory.current": str(GIB), "memory.stat": ""},
        pod: {"memory.max": str(2 * GIB), "memory.current": str(GIB), "memory.stat": ""},
    })
    assert memory._cgroup_reading(tmp_path / "nested" / "self-cgroup", nested) == (
        memory.Reading(GIB, f"cgroup /{pod}"))
