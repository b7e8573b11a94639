"""Large repositories: time to a ready workspace and disk per task, at concurrency 8.

One generated repository (deterministic content: the same bytes on every run) and
``tasks`` workspaces made from it by each contender, ``concurrency`` at a time:

- the floor: ``git worktree add`` alone (one at a time per repository, as git needs);
- the runner: ``run/workspace.prepare``, the function its executor calls, so the figure
  follows whatever main makes a workspace with (a worktree today);
- a clone per task: ``git clone --shared`` (the objects borrowed through alternates,
  as peers that clone per task do at their cheapest; ``--no-hardlinks`` would copy
  the whole object store on top);
- sparse: a worktree checked out in cone mode to one folder, what a task that names
  its folder (a monorepo's service) would need.

Disk per task is what the workspace's directory holds plus what the repository's own
``.git`` grew by (a worktree's index lives there), divided by the tasks.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.lane import git
from bench.result import Check, Figure, median, ratio
from bench.scale import Scale
from lane_runner.run import workspace

FOLDERS = 100
CONCURRENCY = 8
TIME_TARGET = 1.1


def generate(path: Path, files: int, total_bytes: int) -> Path:
    """A repository of ``files`` files in ``FOLDERS`` folders, ``total_bytes`` in all.

    Each file repeats its index's SHA-256 line: deterministic, and it compresses
    well, so the object store is small (a few MB for 100 MB); what a workspace costs
    here is the checkout (``files`` files, ``total_bytes`` written), as for real code,
    and a clone's own object copy (``--no-hardlinks``) would be cheap on this repository
    where a real one's would not.
    """
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    size = max(1, total_bytes // files)
    for index in range(files):
        folder = path / f"pkg{index % FOLDERS:03d}"
        folder.mkdir(exist_ok=True)
        seed = hashlib.sha256(str(index).encode()).hexdigest()
        text = (seed + "\n") * (size // 65 + 1)
        (folder / f"f{index:06d}.txt").write_text(text[:size])
    git("add", "-A", cwd=path)
    git("commit", "-qm", "generated", cwd=path)
    return path


def disk(path: Path) -> int:
    """Bytes allocated under ``path``, each inode once (hard links count once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for directory, _, names in os.walk(path):
        for name in [".", *names]:
            try:
                stat = os.lstat(os.path.join(directory, name))
            except FileNotFoundError:
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


_LOCK = threading.Lock()


def _worktree(repo: Path, target: Path, label: str) -> None:
    with _LOCK:  # git worktree add on one repository must not run concurrently
        git("worktree", "add", "-q", "-b", f"floor/{label}", str(target), cwd=repo)


def _clone(repo: Path, target: Path, label: str) -> None:
    git("clone", "-q", "--shared", str(repo), str(target), cwd=repo.parent)


def _runner(repo: Path, target: Path, label: str) -> None:
    workspace.prepare(str(repo), target, f"lane/bench/{label}")


def _sparse(repo: Path, target: Path, label: str) -> None:
    with _LOCK:
        git(
            "worktree", "add", "-q", "--no-checkout", "-b", f"sparse/{label}", str(target), cwd=repo
        )
    git("sparse-checkout", "set", "--cone", "pkg000", cwd=target)
    git("checkout", "-q", cwd=target)


MAKERS: dict[str, Callable[[Path, Path, str], None]] = {
    "lane-runner": _runner,
    "git worktree add (floor)": _worktree,
    "git clone --shared": _clone,
    "sparse worktree, one folder": _sparse,
}


def _one_round(repo: Path, where: Path, name: str, tasks: int) -> tuple[float, float, int]:
    """Median seconds to a ready workspace, wall seconds for all, bytes per task."""
    where.mkdir(parents=True)
    before = disk(repo / ".git")
    durations: list[float] = []

    def make(index: int) -> None:
        started = time.perf_counter()
        MAKERS[name](repo, where / f"t{index}", f"{where.name}-t{index}")
        durations.append(time.perf_counter() - started)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(make, range(tasks)))
    wall = time.perf_counter() - started
    used = disk(where) + max(0, disk(repo / ".git") - before)
    return median(durations), wall, used // tasks


def _clear(repo: Path, where: Path) -> None:
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=repo, check=True, capture_output=True)


def measure(scale: Scale, workdir: Path) -> Figure:
    files, total = scale.large_repo
    figure = Figure(
        key="large_repo",
        title=f"A large repository ({files:,} files, {total / 1e6:,.0f} MB), concurrency 8",
        baseline="git worktree add alone (the floor); a git clone --shared per task",
        columns=["workspace", "p50 to ready", "wall for all", "vs floor", "disk/task"],
    )
    started = time.perf_counter()
    repo = generate(workdir / "repo", files, total)
    checkout = disk(repo) - disk(repo / ".git")
    generated = time.perf_counter() - started
    samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in MAKERS}
    names = list(MAKERS)
    for index in range(scale.large_rounds):
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            where = workdir / f"r{index}-{names.index(name)}"
            samples[name].append(_one_round(repo, where, name, scale.large_tasks))
            _clear(repo, where)
    wall = {name: median([s[1] for s in samples[name]]) for name in names}
    floor = "git worktree add (floor)"
    for name in names:
        per = median([float(s[2]) for s in samples[name]])
        figure.rows.append(
            [
                name,
                f"{median([s[0] for s in samples[name]]):.2f} s",
                f"{wall[name]:.2f} s",
                ratio(wall[name], wall[floor]),
                f"{per / 1e6:.1f} MB",
            ]
        )
    runner_disk = median([float(s[2]) for s in samples["lane-runner"]])
    versus = wall["lane-runner"] / wall[floor]
    figure.checks = [
        Check("time to ready ≤ 1.1 × git worktree add", f"{versus:.2f}×", versus <= TIME_TARGET),
        Check(
            "disk per task ≤ the checkout",
            f"{runner_disk / 1e6:.1f} MB vs {checkout / 1e6:.1f} MB",
            runner_disk <= checkout * 1.05,
        ),
    ]
    figure.notes.append(
        f"{scale.large_tasks} workspaces per contender and round, {CONCURRENCY} at a time, "
        f"median of {scale.large_rounds} rounds in a rotating order; the checkout alone is "
        f"{checkout / 1e6:.1f} MB (generating and committing the repository took "
        f"{generated:.0f} s). Worktree adds on one repository are serialized (git's "
        "worktree bookkeeping; the runner holds a lock per repository too), so the wall "
        "time for all is the figure; clones run side by side. Disk per task within 5 % of "
        "the checkout counts as met (directory entries and the index)."
    )
    figure.notes.append(
        "The sparse row is an offer, not what the runner does: a task that names its folder "
        f"gets 1/{FOLDERS} of the files here. It changes what the CLI sees (only that "
        "folder and the top level), so it fits a task filed with a workspace that is a "
        "folder of its repository, and a change outside the cone is not checked out."
    )
    return figure
