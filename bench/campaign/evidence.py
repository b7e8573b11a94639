"""The campaign's evidence, gathered once both daemons have stopped: the edges' own
records (``site.Logs``), the board, the shared repository's commits, the homes' lane
states, and the processes still running (``tally.py`` counts it)."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from bench.campaign.site import BOARD, Site
from bench.campaign.tally import Edge, Evidence, ResultCommit
from lane_runner.board.model import Status
from lane_runner.board.sql.board import SqlBoard
from lane_runner.run.delivery import RUN_TRAILER, TASK_TRAILER
from lane_runner.run.lanestate import path_for

log = logging.getLogger(__name__)
_FORMAT = f"%H%x00%(trailers:key={TASK_TRAILER},valueonly,separator=)%x00" \
    f"%(trailers:key={RUN_TRAILER},valueonly,separator=)"


def gather(site: Site) -> Evidence:
    tasks = {task.id: task.status.value for task in site.board.list_tasks()}
    commits, vanished = every_result_commit([site.repo, *task_clones(site.root)])
    return Evidence(
        tasks=tasks,
        delivered=delivered(site.board, tasks, site.repo),
        commits=commits,
        vanished=vanished,
        accepted=frozenset(_accepted(site, tasks)),
        cli_runs=tuple(_cli_runs(site.logs.cli, tasks)),
        pushes=tuple(_edges(site.logs.pushes, tasks)),
        after_done=tuple(_edges(site.logs.after_done, tasks)),
        processes_left=tuple(ours(site.root)),
    )


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def task_clones(root: Path) -> list[Path]:
    """The tasks' clones under ``root`` (``run/taskgit.py``: a ``.git`` directory sharing
    a repository's objects), where a result commit is made before the runner publishes
    it into the repository: one a kill left there is evidence too."""
    return sorted(dot.parent for dot in root.rglob(".git")
                  if dot.is_dir() and (dot / "objects" / "info" / "alternates").is_file())


def every_result_commit(
    places: list[Path],
) -> tuple[tuple[ResultCommit, ...], tuple[str, ...]]:
    """``result_commits`` of the repository and the clones together: each commit once,
    made when it was first made anywhere; gone only when gone from every one of them."""
    times: dict[str, float] = {}
    for place in places:
        for sha, when in _commit_times(place).items():
            times[sha] = min(when, times.get(sha, when))
    found: dict[str, ResultCommit] = {}
    vanished: set[str] | None = None
    for place in places:
        commits, gone = result_commits(place, times)
        found.update({commit.sha: commit for commit in commits})
        vanished = set(gone) if vanished is None else vanished & set(gone)
    ordered = tuple(sorted(found.values(), key=lambda c: (c.task, c.run, c.sha)))
    return ordered, tuple(sorted(vanished or ()))


def _commit_times(repo: Path) -> dict[str, float]:
    """Commit → when a task branch first moved to it, from the branches' reflogs (git
    writes one line per move: ``old new ident seconds zone<TAB>message``). A commit a
    later run left behind is there too. Seconds are whole: a commit is taken as made at
    the end of its second (``tally`` compares CLI starts with it)."""
    times: dict[str, float] = {}
    logs = repo / ".git" / "logs" / "refs" / "heads"
    for path in sorted(logs.rglob("*")) if logs.is_dir() else []:
        if not path.is_file():
            continue
        for line in _lines(path):
            head, _, _ = line.partition("\t")
            fields = head.split(" ")
            if len(fields) >= 5 and fields[-2].isdigit():
                times.setdefault(fields[1], float(fields[-2]) + 1.0)
    return times


def _trailers(repo: Path, *revisions: str) -> list[tuple[str, str, str]]:
    """(commit, Lane-Task, Lane-Run) of the commits ``git log REVISIONS`` lists."""
    said = subprocess.run(
        ["git", "log", f"--format={_FORMAT}", *revisions],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout
    found = []
    for line in said.splitlines():
        sha, task, run = (line.split("\0") + ["", ""])[:3]
        found.append((sha, task.strip(), run.strip()))
    return found


def _these(repo: Path, shas: Iterable[str]) -> list[tuple[str, str, str]]:
    """``_trailers`` of exactly these commits."""
    wanted = sorted(set(shas))
    return _trailers(repo, "--no-walk=unsorted", *wanted) if wanted else []


def _git(repo: Path, *args: str, given: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, input=given, capture_output=True,
                          text=True, check=True).stdout


def _tips(repo: Path) -> list[str]:
    """What ``--all`` would walk from: every ref and every worktree's HEAD. Read one by
    one, because ``git log --all`` gives up (exit 128) on a worktree whose HEAD names an
    object the repository lacks, which a ``git worktree add`` killed halfway can leave."""
    refs = _git(repo, "for-each-ref", "--format=%(objectname)").split()
    heads = [line.removeprefix("HEAD ") for line in
             _git(repo, "worktree", "list", "--porcelain").splitlines()
             if line.startswith("HEAD ")]
    return [*refs, *heads]


def _commits_among(repo: Path, shas: Iterable[str]) -> tuple[list[str], list[str]]:
    """(present, missing): which of ``shas`` name a commit the repository has."""
    wanted = sorted(set(shas))
    if not wanted:
        return [], []
    said = _git(repo, "cat-file", "--batch-check=%(objectname) %(objecttype)",
                given="".join(f"{sha}\n" for sha in wanted)).splitlines()
    present = [sha for sha, line in zip(wanted, said, strict=True)
               if line.endswith(" commit")]
    return present, [sha for sha in wanted if sha not in present]


def result_commits(
    repo: Path, made: dict[str, float]
) -> tuple[tuple[ResultCommit, ...], tuple[str, ...]]:
    """Every runner-made commit of the campaign's board: reachable from any ref or
    worktree HEAD of the repository, or in a branch's reflog (a commit a later run left
    behind); and the commits a reflog names that the repository no longer has (a result
    gone: counted lost)."""
    tips, _ = _commits_among(repo, _tips(repo))
    seen, vanished = _commits_among(repo, made)
    listed = (_trailers(repo, *tips) if tips else []) + _these(repo, seen)
    commits: dict[str, ResultCommit] = {}
    for sha, task, run in listed:
        board, _, task_id = task.partition("/")
        if board != BOARD or not run.isdigit():
            continue
        commits[sha] = ResultCommit(sha, task_id, int(run), made.get(sha))
    ordered = tuple(sorted(commits.values(), key=lambda c: (c.task, c.run, c.sha)))
    return ordered, tuple(vanished)


def delivered(board: SqlBoard, tasks: dict[str, str], repo: Path) -> dict[str, int]:
    """Per done task, the run named by the commit its completed (or replayed) event shows."""
    shown: dict[str, str] = {}
    for task, status in tasks.items():
        if status != "done":
            continue
        for event in board.events(task):
            if event.kind in ("completed", "replayed"):
                delivery = (event.data.get("metadata") or {}).get("delivery") or {}
                if delivery.get("commit"):
                    shown[task] = delivery["commit"]
    runs = {sha: run for sha, _, run in _these(repo, shown.values())}
    return {task: int(runs[sha]) for task, sha in shown.items() if runs.get(sha, "").isdigit()}


def _deliveries(site: Site, tasks: Iterable[str]) -> Iterable[tuple[str, dict[str, Any]]]:
    """(task, delivery) of every delivery a home's lane state holds."""
    for runner in site.runners:
        for task in tasks:
            path = path_for(runner.home.lane_dir(BOARD), task)
            try:
                state = orjson.loads(path.read_bytes())
            except FileNotFoundError:
                continue
            except (OSError, orjson.JSONDecodeError) as error:
                log.warning("lane state %s unreadable (%s): not counted", path, error)
                continue
            if state.get("delivery"):
                yield task, state["delivery"]


def _accepted(site: Site, tasks: Iterable[str]) -> set[tuple[str, int]]:
    return {(task, int(delivery["accepted_run"])) for task, delivery in _deliveries(site, tasks)}


def unfollowed(site: Site) -> list[str]:
    """Done tasks a home still has to run the follow-ups of (delivery ``journaled``)."""
    done = [task.id for task in site.board.list_tasks(Status.DONE)]
    return [task for task, delivery in _deliveries(site, done) if delivery["stage"] == "journaled"]


def _cli_runs(path: Path, tasks: dict[str, str]) -> Iterable[Edge]:
    for line in _lines(path):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.warning("a torn CLI record (its CLI killed while writing it): %r", line)
            continue
        task = Path(record["cwd"]).name
        if task in tasks:
            yield Edge(float(record["running_at"]), task)


def _edges(path: Path, tasks: dict[str, str]) -> Iterable[Edge]:
    for line in _lines(path):
        at, task, *key = line.split(" ")
        if task in tasks:
            yield Edge(float(at), task, key[0] if key else "")


def ours(root: Path) -> list[str]:
    """Processes of the campaign still alive: working in ``root``, or naming it in their
    command line or environment (the CLIs' log, the daemons' homes); "pid: command"."""
    marker = os.fsencode(root) + b"/"  # not a sibling whose name starts with root's
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.fsencode(os.readlink(entry / "cwd")) + b"/"
            command = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or a zombie: nothing running
        if cwd.startswith(marker) or marker in command or marker in environ:
            shown = command.replace(b"\0", b" ").decode(errors="replace").strip()
            found.append(f"{entry.name}: {shown[:200]}")
    return found
