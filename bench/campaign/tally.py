"""What the campaign counts, from what the edges recorded and what the board, the
repository and the homes hold at the end (``evidence.py`` gathers it). Pure: the
counting rules are unit-tested on hand-made evidence.

- ``lost``: an accepted result (a runner-made commit's ``Lane-Task``/``Lane-Run``, or a
  home's lane state ``delivery``) that is not the result the board shows for its task;
  and a result commit the post-commit hook saw made that the repository no longer has;
- ``duplicate_commits``: more than one runner-made commit for one task (each past the
  first counts);
- ``second_runs``: CLI runs of a task that started after its first result commit;
- ``followups_twice``: a push or an ``after_done`` run repeated for a task, unless every
  run of it carried the same ``LANE_DELIVERY_ID`` (at-least-once with a key is allowed);
- ``processes_left``: processes of the campaign alive after both daemons stopped;
- ``unfinished``: tasks neither done nor blocked when the campaign gave up waiting;
- ``followups_missing``: done tasks whose push or ``after_done`` never ran;
- ``unrecorded``: done tasks with no CLI run or no result commit on record: the
  campaign's own recorders failed, and every other count would be blind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Edge:
    """One recorded invocation (a CLI run, a push, an after_done hook) of a task."""

    at: float
    task: str
    key: str = ""
    """``LANE_DELIVERY_ID`` as the invocation saw it; empty when it had none."""


@dataclass(frozen=True)
class ResultCommit:
    """A runner-made commit: its trailers name the task and the run that accepted it."""

    sha: str
    task: str
    run: int
    made_at: float | None
    """When the post-commit hook saw it; None for one found only in the repository."""


@dataclass(frozen=True)
class Evidence:
    tasks: Mapping[str, str]
    """Every task of the board and its status at the end."""
    delivered: Mapping[str, int]
    """Per done task, the run whose accepted result the board shows (its commit's trailer)."""
    commits: tuple[ResultCommit, ...] = ()
    accepted: frozenset[tuple[str, int]] = frozenset()
    """(task, run) of every accepted result a home's lane state still holds."""
    cli_runs: tuple[Edge, ...] = ()
    pushes: tuple[Edge, ...] = ()
    after_done: tuple[Edge, ...] = ()
    processes_left: tuple[str, ...] = ()
    vanished: tuple[str, ...] = ()
    """Commits the post-commit hook saw made that the repository does not have."""


@dataclass(frozen=True)
class Counts:
    tasks: int
    lost: int
    duplicate_commits: int
    second_runs: int
    followups_twice: int
    processes_left: int
    unfinished: int
    followups_missing: int = 0
    unrecorded: int = 0
    examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per non-zero count, what was counted (task ids, processes), to look at."""

    def failed(self) -> list[str]:
        """The names of the counts that are not zero."""
        names = ("lost", "duplicate_commits", "second_runs", "followups_twice",
                 "processes_left", "unfinished", "followups_missing", "unrecorded")
        return [name for name in names if getattr(self, name)]

    def line(self, seed: int, kills: int) -> str:
        return (
            f"campaign: seed={seed} kills={kills} tasks={self.tasks} lost={self.lost} "
            f"duplicate_commits={self.duplicate_commits} second_runs={self.second_runs} "
            f"followups_twice={self.followups_twice} processes_left={self.processes_left} "
            f"unfinished={self.unfinished} followups_missing={self.followups_missing} "
            f"unrecorded={self.unrecorded}"
        )


def count(evidence: Evidence) -> Counts:
    lost = _lost(evidence)
    duplicates = _duplicates(evidence.commits)
    second = _second_runs(evidence.commits, evidence.cli_runs)
    twice = _repeated(evidence.pushes) + _repeated(evidence.after_done)
    unfinished = sorted(
        task for task, status in evidence.tasks.items() if status not in ("done", "blocked")
    )
    done = sorted(task for task, status in evidence.tasks.items() if status == "done")
    missing = _missing(done, evidence.pushes, evidence.after_done)
    unrecorded = _missing(done, evidence.cli_runs, evidence.commits)
    examples = {
        "lost": (*(f"{task} run {run}" for task, run in lost),
                 *(f"commit {sha} (made, not in the repository)" for sha in evidence.vanished)),
        "duplicate_commits": tuple(duplicates),
        "second_runs": tuple(second),
        "followups_twice": tuple(twice),
        "processes_left": evidence.processes_left,
        "unfinished": tuple(unfinished),
        "followups_missing": tuple(missing),
        "unrecorded": tuple(unrecorded),
    }
    return Counts(
        tasks=len(evidence.tasks),
        lost=len(lost) + len(evidence.vanished),
        duplicate_commits=len(duplicates),
        second_runs=len(second),
        followups_twice=len(twice),
        processes_left=len(evidence.processes_left),
        unfinished=len(unfinished),
        followups_missing=len(missing),
        unrecorded=len(unrecorded),
        examples={name: found for name, found in examples.items() if found},
    )


def _lost(evidence: Evidence) -> list[tuple[str, int]]:
    accepted = {(c.task, c.run) for c in evidence.commits} | set(evidence.accepted)
    return sorted(
        (task, run) for task, run in accepted if evidence.delivered.get(task) != run
    )


def _duplicates(commits: Iterable[ResultCommit]) -> list[str]:
    """One entry per result commit past a task's first."""
    shas: dict[str, set[str]] = defaultdict(set)
    for commit in commits:
        shas[commit.task].add(commit.sha)
    return [task for task, made in sorted(shas.items()) for _ in range(len(made) - 1)]


def _second_runs(commits: Iterable[ResultCommit], runs: Iterable[Edge]) -> list[str]:
    """One entry per CLI run that began after its task's first result commit was made."""
    first: dict[str, float] = {}
    for commit in commits:
        if commit.made_at is not None:
            first[commit.task] = min(first.get(commit.task, commit.made_at), commit.made_at)
    return [run.task for run in runs if run.task in first and run.at > first[run.task]]


def _repeated(edges: Iterable[Edge]) -> list[str]:
    """One entry per repeat of a follow-up, unless each run of it had the same key."""
    keys: dict[str, list[str]] = defaultdict(list)
    for edge in edges:
        keys[edge.task].append(edge.key)
    return [
        task
        for task, seen in sorted(keys.items())
        if not (seen[0] and len(set(seen)) == 1)
        for _ in range(len(seen) - 1)
    ]


def _missing(tasks: Iterable[str], *records: Iterable[Edge | ResultCommit]) -> list[str]:
    """The tasks some kind of ``records`` has no entry for."""
    kinds = [{record.task for record in kind} for kind in records]
    return [task for task in tasks if any(task not in seen for seen in kinds)]
