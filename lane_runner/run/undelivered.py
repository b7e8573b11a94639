"""An accepted result the board never got, found by whichever runner meets it next
(docs/ARCHITECTURE.md §6, "Delivered once").

A runner killed between its result commit and its journal's pending record leaves
the result in two places: its home's lane state (``delivery`` stage ``accepted``)
and the commit itself, which carries it (``delivery.Carried``). The lane state
serves a restart of that home (``Accepted.redeliver``, ``run/accepted.py``). The commit serves every
runner of the board: another home that claims the task next (its run reclaimed by
``recover``, or its lease expired when the home never came back) finds the commit
on the task's branch and delivers it as its own run's result, without a CLI run and
without a second commit.

The decisions are pure (``deliverable``, ``superseded_by``): they read the task's
runs as the board has them. What they act on is read here (``on_branch``), and the
lane state a home kept of a result another run delivered is cleared (``reconcile``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import schemas
from journal import Document, Journal
from journal import names as journal_names
from lane_runner.board.base import Board
from lane_runner.board.model import Outcome, Run
from lane_runner.errors import NotFound
from lane_runner.run import branchhead, delivery, git, lanestate, workspace
from lane_runner.run.stage import Stage

log = logging.getLogger(__name__)
RESULT_SCHEMA = "worker-result.schema.json"


def superseded_by(accepted_run: int, runs: Sequence[Run]) -> int | None:
    """The first run from ``accepted_run`` on that completed the task, if one did: the
    answer of ``accepted_run`` reached the board through it, or a later answer did.
    Either way it is not to be delivered again. Run ids only grow per task, so a run
    completed before ``accepted_run`` (the task done, then reopened) does not count."""
    completed = [
        run.id for run in runs if run.id >= accepted_run and run.outcome is Outcome.COMPLETED
    ]
    return min(completed, default=None)


def deliverable(
    commits: Sequence[delivery.ResultCommit], runs: Sequence[Run], current: int
) -> delivery.ResultCommit | None:
    """The result commit run ``current`` delivers instead of running a CLI, or None.

    Only the newest result commit of the task counts: the branch holds every older one
    under it. It is delivered when its run is one of this task's, ended without
    completing (its runner died or restarted: reclaimed, expired; or blocked before
    the board took it), and no run from it on completed the task.
    """
    if not commits:
        return None
    newest = commits[0]
    run = next((run for run in runs if run.id == newest.run_id), None)
    if run is None or run.id == current or run.ended_at is None:
        return None
    if superseded_by(run.id, runs) is not None:
        return None
    return newest


@dataclass(frozen=True)
class Found:
    """An earlier run's accepted result, as its commit on the branch carries it."""

    run_id: int
    commit: str
    carried: delivery.Carried


def on_branch(
    board: Board, worktree: Path, slug: str, task_id: str, current: int, owner: str | None
) -> Found | None:
    """The result run ``current`` delivers: the one the newest result commit of the task
    on the branch checked out in ``worktree`` carries, when ``deliverable``. The board is
    read only when the branch has a result commit of the task."""
    commits = delivery.result_commits(worktree, slug, task_id, owner)
    if not commits:
        return None
    try:
        runs = board.runs(task_id)
    except NotFound:
        return None
    chosen = deliverable(commits, runs, current)
    if chosen is None:
        return None
    carried = delivery.carried(worktree, chosen.sha, owner)
    if carried is None:
        log.warning(
            "%s/%s: run %s's result commit %s carries no result to deliver; the task runs "
            "again", slug, task_id, chosen.run_id, chosen.sha,
        )
        return None
    problem = schemas.first_error(RESULT_SCHEMA, carried.result)
    if problem is None and carried.result.get("status") != "completed":
        problem = f"status {carried.result.get('status')!r}, not completed"
    if problem is not None or "route" not in carried.metadata:
        log.warning(
            "%s/%s: the result run %s's commit %s carries is not one to deliver (%s); the "
            "task runs again", slug, task_id, chosen.run_id, chosen.sha,
            problem or "no route in its metadata",
        )
        return None
    return Found(chosen.run_id, chosen.sha, carried)


@dataclass(frozen=True)
class Reconciled:
    """A home's lane state that kept a result another run delivered, now cleared."""

    board: str
    task_id: str
    accepted_run: int
    delivered_by: int

    def describe(self) -> str:
        return (
            f"run {self.accepted_run}'s accepted result reached the board through run "
            f"{self.delivered_by}; this home's lane state no longer holds it"
        )


def reconcile(
    board: Board,
    journal: Journal,
    lanes_dir: Path,
    slug: str,
    task_ids: Iterable[str] | None = None,
) -> list[Reconciled]:
    """Clear each lane state of this home (of ``task_ids``, else of every task) that holds
    an accepted result (stage ``accepted``) the board has since completed the task with,
    through another run (another home's, finding it on the branch) or a later answer:
    stale, it would otherwise stay ``accepted`` for ever. Run by recovery, with the home
    lock held, and by the cleanup sweep for the tasks it finds done (never one of this
    home's runs at work: its task is not done).

    A state whose delivering run (``run``: the accepting one, or a later run of this home
    that took an earlier run's result up) completed the task is not stale: its pending
    record reached the board (recovery finalized it) before the state said ``journaled``,
    and this home still owes the result's push and ``after_done`` hook, which the cleanup
    sweep runs from it (``cleanup.Tidy``). Cleared, they would never run (the crash
    campaign found both)."""
    cleared: list[Reconciled] = []
    for task_id in _with_states(lanes_dir) if task_ids is None else task_ids:
        state = lanestate.saved(lanes_dir, slug, task_id)
        if state is None or state.stage() is not Stage.ACCEPTED:
            continue
        assert state.delivery is not None
        accepted = state.delivery.accepted_run
        try:
            by = superseded_by(accepted, board.runs(task_id))
        except NotFound:
            continue  # a task the board no longer has: its state goes with cleanup
        if by is None or by == state.delivery.run:
            continue
        state.delivered_elsewhere()
        name = journal_names.lane_state(task_id)
        try:
            journal.write_documents(slug, [Document(name, state.to_document())])
        except OSError as error:  # the state stays as it was: the next pass clears it
            log.warning("%s/%s: lane state not reconciled now: %s", slug, task_id, error)
            continue
        done = Reconciled(slug, task_id, accepted, by)
        log.info("%s/%s: %s", slug, task_id, done.describe())
        cleared.append(done)
    return cleared


def _with_states(lanes_dir: Path) -> list[str]:
    """The tasks that have a lane state in ``lanes_dir``."""
    found = []
    for path in sorted(lanes_dir.glob("*.json")) if lanes_dir.is_dir() else []:
        parsed = journal_names.parse(path.name)
        if parsed.kind is journal_names.Kind.LANE_STATE and parsed.task_id is not None:
            found.append(parsed.task_id)
    return found


@dataclass(frozen=True)
class Kept:
    """An accepted result this home kept only in its lane state, committed by recovery."""

    task_id: str
    run_id: int
    commit: str | None


def commit_kept(
    board: Board, lanes_dir: Path, worktree: Path, slug: str, run: Run,
    author: str, owner: str | None,
) -> Kept | None:
    """Make the result commit of ``run``'s accepted result before recovery hands the run
    back, when the runner died after accepting it and before committing it.

    Until that commit exists the result is in this home's lane state alone, and the
    runner of the board that claims the task next (often another home's) would run the
    CLI again. Committed, it is on the task's branch, carried, for whichever runner
    meets it next (``on_branch``). ``deliver`` finds a commit already made by its
    trailers, so this never makes a second one. Nothing is done for a hosted workspace
    (no worktree of ours) or a lane state without such a result; a commit git refuses
    (HEAD elsewhere, a worktree mid-merge) is logged, and the home's own next run
    delivers or blocks as before.
    """
    state = lanestate.saved(lanes_dir, slug, run.task_id)
    if state is None or state.stage() is not Stage.ACCEPTED or not worktree.is_dir():
        return None
    accepted = state.delivery
    assert accepted is not None
    if accepted.run != run.id:
        return None
    branch = _checked_out(worktree, owner) or workspace.branch_name(slug, run.task_id)
    route = accepted.metadata["route"]
    try:
        title = board.get_task(run.task_id).title
        facts = delivery.Facts(
            board=slug, task_id=run.task_id, run_id=accepted.accepted_run, title=title,
            summary=accepted.result["summary"], provider=route["provider"],
            model=route["model"],
            carried=delivery.Carried(accepted.result, accepted.metadata, state.base),
        )
        branchhead.bring_back(worktree, branch, owner)
        made = delivery.deliver(
            worktree, branch, state.base, facts, delivery.Author.of(author), owner
        )
    except (NotFound, delivery.DeliveryError, OSError) as error:
        log.warning("%s/%s: run %s's accepted result not committed by recovery (%s); this "
                    "home's next run of the task delivers it", slug, run.task_id, run.id, error)
        return None
    log.info("%s/%s: run %s's accepted result committed on %s by recovery (%s), for the "
             "runner that claims the task next", slug, run.task_id, run.id, branch, made.head)
    return Kept(run.task_id, run.id, made.head)


def _checked_out(worktree: Path, owner: str | None) -> str | None:
    """The branch ``worktree`` has checked out, when it is a task branch of the runner's."""
    said = git.run("symbolic-ref", "--quiet", "--short", "HEAD", cwd=worktree, owner=owner)
    name = said.stdout.strip()
    return name if said.returncode == 0 and name.startswith("lane") else None
