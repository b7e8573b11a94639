"""What a finished task leaves on disk goes; what a blocked one leaves stays (issue 31).

The daemon sweeps on the journal's collection cadence (``gc_interval``), on a thread
of its own: git and the operator's hooks may take their time, the loop may not.
For each task the board shows done (or archived after it was done):

0. A lane state of this home that still holds the task's result as ``accepted``,
   which the board got through another run (another home's), is cleared
   (``run/undelivered.py``).
1. Follow-ups the result has not had yet (a board that took it after its run ended:
   a recovery's replay, a restart in between) run now: the push and ``after_done``
   (``run/followup.py``).
2. Its worktree is removed once it holds nothing the branch does not (clean, and the
   branch holds the result's commit), or once the task has been done for
   ``retention_days``; ``before_remove`` runs first. Never, whatever its age, while
   removing it would lose work: uncommitted changes, or commits no ref but its HEAD
   reaches (``run/keeping.py``): such a worktree is kept and named. The branch stays,
   unless ``delete_branches`` and it is merged into the repository's HEAD or pushed
   to ``push_remote``.
3. Then the task is settled: its lane state joins the journal's retention (age,
   count and bytes with the other artifacts, ``journal/retention.py``), and its
   provider logs go with the lane state.

Each board's usage ledger first: what the home did not send yet goes to the board's
shared ledger, and the home's records past ``usage_retention_days`` that the board holds
go (``usage/share.py``), on every kind of board.

A blocked task keeps everything for whoever unblocks it; a task not done is not
looked at. Hosted boards' workspaces are the host's (Hermes): never removed; only a
result's owed follow-ups run there (``run/hostedfollow.py``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journal import CollectReport, Document, RetentionPolicy
from journal import names as journal_names
from lane_runner.board.base import Board, BoardUnavailable, HostedBoard
from lane_runner.board.model import Status, Task
from lane_runner.config import Config
from lane_runner.errors import NotFound
from lane_runner.run import (
    delivery,
    followup,
    git,
    hooks,
    hostedfollow,
    keeping,
    lanestate,
    taskgit,
    undelivered,
    workspace,
)
from lane_runner.run.stage import Stage
from lane_runner.service import approvals, workerpool
from lane_runner.service.services import Services
from lane_runner.usage import share

log = logging.getLogger(__name__)
AUTHOR = "lane-runner"
_ROTATED = re.compile(r"\.log(\.\d+)?")


@dataclass
class SweepReport:
    """What one sweep did, task by task (``board/task``)."""

    followed_up: list[str] = field(default_factory=list)
    worktrees_removed: list[str] = field(default_factory=list)
    branches_deleted: list[str] = field(default_factory=list)
    logs_removed: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    """Worktrees left in place, and why."""
    held: list[keeping.Kept] = field(default_factory=list)
    """Worktrees kept past ``retention_days`` because removing them would lose work."""
    journal: CollectReport = field(default_factory=CollectReport)
    usage_dropped: int = 0
    """Home usage records past ``usage_retention_days`` that their board holds."""

    def log(self) -> None:
        """What the sweep removed, in the log (nothing when it removed nothing)."""
        if self.usage_dropped:
            log.info("usage ledger: %d old record(s) the boards hold left this home",
                     self.usage_dropped)
        if self.worktrees_removed or self.followed_up or self.journal.removed:
            log.info(
                "cleanup: %d worktrees removed, %d results followed up, %d journal files "
                "and %d logs removed",
                len(self.worktrees_removed),
                len(self.followed_up),
                len(self.journal.removed),
                len(self.logs_removed),
            )


def retention(cfg: Config) -> RetentionPolicy:
    """The journal's retention as configured (``retention_days``, ``_count``, ``_bytes``)."""
    return RetentionPolicy(
        max_age_seconds=cfg.retention_days * 86400,
        max_count=cfg.retention_count,
        max_bytes=cfg.retention_bytes,
    )


def sweep(
    services: Services, policy: RetentionPolicy, now: float, stopping: Callable[[], bool]
) -> SweepReport:
    """One pass over every board; ``stopping`` ends it between tasks."""
    report = SweepReport()
    settled: set[tuple[str, str]] = set()
    for slug in services.store.board_slugs():
        if stopping():
            return report
        try:
            with services.resting.use(slug):
                board = services.store.board(slug)
                report.usage_dropped += _settle_usage(services, board, now)
                if isinstance(board, HostedBoard):
                    report.followed_up += hostedfollow.follow_up_all(services, board)
                    continue
                finished = _finished(board)
                lanes = services.home.lane_dir(slug)
                ids = [task.id for task in finished]
                undelivered.reconcile(board, services.journal, lanes, slug, ids)
            for task in finished:
                if stopping():
                    return report
                if _tidy(Tidy(services, board, task, policy, now, report)):
                    settled.add((slug, task.id))
        except BoardUnavailable as error:
            log.info("cleanup of board %s waits: %s", slug, error)
    keeping.record(services.home, report.held)  # a whole sweep's word, for doctor
    report.journal = services.journal.collect(now, policy, lambda b, t: (b, t) in settled)
    for slug, task_id in sorted(settled):
        if not lanestate.path_for(services.home.lane_dir(slug), task_id).exists():
            report.logs_removed += _remove_logs(services.home.log_file(slug, task_id))
    return report


def _settle_usage(services: Services, board: Board, now: float) -> int:
    """The usage ledger's share and retention (``usage/share.py``); a disk error
    leaves both for the next sweep (the records stay in the home)."""
    try:
        return share.settle(board, services.ledger, services.cfg.usage_retention_days, now)
    except OSError as error:
        log.warning("usage ledger of board %s left for the next sweep: %s", board.slug, error)
        return 0


def _tidy(tidy: Tidy) -> bool:
    """One task's cleanup; a disk error leaves that task for the next sweep."""
    try:
        return tidy.run()
    except OSError as error:
        log.warning("cleanup of %s left for the next sweep: %s", tidy.name, error)
        return False


def _finished(board: Board) -> list[Task]:
    """Done tasks, and archived ones that were done first."""
    archived = [t for t in board.list_tasks(Status.ARCHIVED) if t.completed_run_id is not None]
    return board.list_tasks(Status.DONE) + archived


class Tidy:
    """One finished task: its follow-ups, then its worktree. ``run`` says whether it is
    settled (nothing of it left but its lane state and logs)."""

    def __init__(
        self,
        services: Services,
        board: Board,
        task: Task,
        policy: RetentionPolicy,
        now: float,
        report: SweepReport,
    ) -> None:
        self.s, self.board, self.task, self.report = services, board, task, report
        self.policy, self.now = policy, now
        self.name = f"{task.board}/{task.id}"
        self.worktree = services.home.worktree(task.board, task.id)
        self.owner = workerpool.owner_of(self.worktree, services.cfg)  # who its git runs as
        self.lanes_dir = services.home.lane_dir(task.board)
        self.state: lanestate.LaneState | None = None
        if lanestate.path_for(self.lanes_dir, task.id).exists():
            self.state = lanestate.load(
                self.lanes_dir, task.board, task.id, task.completed_run_id or 0
            )

    def run(self) -> bool:
        if self.s.at_work(self.task.completed_run_id or 0):
            return False  # its run is still pushing or running after_done
        owed = self._owes_follow_ups()
        if owed and self.worktree.is_dir():
            self._follow_up()
            owed = False
        if not self.worktree.is_dir():
            return True
        if approvals.push_gate(self.s.cfg, self.task) is approvals.PushGate.WAIT:
            self.report.kept[self.name] = "its push and after_done wait for approval"
            return False
        expired = self._done_at() + self.policy.max_age_seconds <= self.now
        if owed and not expired:
            self.report.kept[self.name] = "its push and after_done hook have not run yet"
            return False
        if self._would_lose(expired):
            return False
        why_kept = None if expired else self._result_off_its_branch()
        if why_kept is not None:
            self.report.kept[self.name] = why_kept
            return False
        return self._remove(force=expired)

    # -- follow-ups ---------------------------------------------------------------
    def _owes_follow_ups(self) -> bool:
        """The lane state says this result's push and after_done have not run."""
        accepted = self.state.delivery if self.state is not None else None
        return (
            accepted is not None
            and accepted.run == self.task.completed_run_id
            and self.state is not None
            and self.state.stage() is not Stage.FOLLOWED
        )

    def _follow_up(self) -> None:
        assert self.state is not None and self.task.completed_run_id is not None
        delivered = self._delivered()
        state = self.state
        if state.stage() is Stage.ACCEPTED:
            # The board completed this very run, which only its pending record does: the
            # result was journaled, and the runner stopped before its lane state said so.
            assert state.delivery is not None
            state.journaled(state.delivery.metadata)

        def save() -> None:
            document = Document(journal_names.lane_state(self.task.id), state.to_document())
            self.s.journal.write_documents(self.task.board, [document])

        steps = followup.Steps(state, save)
        facts = followup.facts_of(
            self.task.board, self.task.id, self.task.title, self.worktree,
            self.task.completed_run_id, self.task.summary or "", delivered, steps.key,
        )
        notes = followup.Notes(
            self._say, lambda: [c.body for c in self.board.comments(self.task.id)]
        )
        if followup.follow_up(
            self.s.cfg, facts, delivered, notes, self.s.cancel, steps,
            lambda: self.board.get_task(self.task.id),
        ):
            self.report.followed_up.append(self.name)  # else the next sweep runs the rest

    def _delivered(self) -> dict[str, Any] | None:
        """What the board took as the result's commit: the completed event's word."""
        run_id = self.task.completed_run_id
        for event in reversed(self.board.events(self.task.id)):
            if event.kind in ("completed", "replayed") and event.run_id == run_id:
                found = event.data.get("metadata", {}).get("delivery")
                return found if isinstance(found, dict) else None
        return None

    # -- the worktree ---------------------------------------------------------------
    def _done_at(self) -> float:
        """When the task was done: its completing run's end (its update time, failing that)."""
        try:
            run = self.board.get_run(self.task.completed_run_id or 0)
        except NotFound:
            return self.task.updated_at
        return run.ended_at or self.task.updated_at

    def _would_lose(self, expired: bool) -> bool:
        """Whether removing the worktree would lose work (``run/keeping.py``): then it is
        kept, whatever its age, and named (past ``retention_days``, for ``doctor`` too)."""
        lost = keeping.would_lose(self.worktree, self.owner)
        if lost is None:
            return False
        self.report.kept[self.name] = (
            f"{lost}: removing it would lose them; it stays until they are on a branch "
            "or discarded"
        )
        if expired:
            self.report.held.append(keeping.Kept(self.name, str(self.worktree), lost))
        return True

    def _result_off_its_branch(self) -> str | None:
        """Why the result's commit may not be on its branch yet; None when it is."""
        owner = self.owner
        delivered = self._delivered() or {}
        commit, branch = delivered.get("head"), delivered.get("branch")
        if not commit or not branch:
            return None  # clean, and no commit to look for: nothing would be lost
        held = git.run("merge-base", "--is-ancestor", commit, f"refs/heads/{branch}",
                       cwd=taskgit.branches_of(self.worktree), owner=owner)
        if held.returncode != 0:
            return f"branch {branch} does not hold the result's commit {commit[:12]}"
        return None

    def _remove(self, *, force: bool) -> bool:
        owner = self.owner
        facts = hooks.Facts(
            board=self.task.board,
            task_id=self.task.id,
            title=self.task.title,
            branch=self._branch() or "",
            worktree=self.worktree,
            run_id=self.task.completed_run_id,
            commit=delivery.head(self.worktree, owner),
            summary=self.task.summary or "",
        )
        ran = hooks.run(self.s.cfg.hooks, "before_remove", facts, owner=owner,
                        passes=self.s.cfg.worker_env, egress=hooks.egress(self.s.cfg))
        if ran is not None and not ran.ok:
            self._comment(ran.describe())
        if self._would_lose(force):  # the hook may have changed or committed something
            return False
        repository = self._repository()
        left = workspace.remove(self.worktree, owner, force=force)
        if left is not None:
            log.warning("worktree of %s not removed: %s", self.name, left)
            self.report.kept[self.name] = f"git worktree remove failed: {left}"
            return False
        self.report.worktrees_removed.append(self.name)
        if self.s.cfg.delete_branches and repository is not None and facts.branch:
            self._delete_branch(repository, facts.branch)
        return True

    def _branch(self) -> str | None:
        said = git.run("symbolic-ref", "--quiet", "--short", "HEAD",
                       cwd=self.worktree, owner=self.owner)
        return said.stdout.strip() if said.returncode == 0 else None

    def _repository(self) -> Path | None:
        """The repository's common directory: its branches, once the worktree is gone."""
        if taskgit.is_clone(self.worktree):
            return taskgit.repository_of(self.worktree)
        said = git.run("rev-parse", "--path-format=absolute", "--git-common-dir",
                       cwd=self.worktree, owner=self.owner)
        return Path(said.stdout.strip()) if said.returncode == 0 and said.stdout.strip() else None

    def _delete_branch(self, repository: Path, branch: str) -> None:
        """Delete ``branch`` only where its commits live on: merged into the repository's
        HEAD, or on ``push_remote``'s remote-tracking branch."""
        owner = self.owner
        ref = f"refs/heads/{branch}"
        homes = ["HEAD", f"refs/remotes/{self.s.cfg.push_remote}/{branch}"]
        if not any(
            git.run("merge-base", "--is-ancestor", ref, home, cwd=repository,
                    owner=owner).returncode == 0
            for home in homes
        ):
            log.info("branch %s of %s kept: neither merged nor pushed", branch, self.name)
            return
        deleted = git.run("branch", "--delete", "--force", "--", branch,
                          cwd=repository, owner=owner)
        if deleted.returncode == 0:
            self.report.branches_deleted.append(f"{self.name}: {branch}")
        else:
            log.warning("branch %s of %s not deleted: %s", branch, self.name,
                        deleted.stderr.strip())

    def _say(self, text: str) -> None:
        """A comment of a follow-up: BoardUnavailable leaves it to the next sweep."""
        self.board.comment(self.task.id, text, author=AUTHOR)

    def _comment(self, text: str) -> None:
        try:
            self.board.comment(self.task.id, text, author=AUTHOR)
        except BoardUnavailable as error:
            log.warning("comment on %s skipped (board unavailable: %s): %s", self.name, error, text)


def _remove_logs(log_file: Path) -> list[str]:
    """The task's provider log and its rotated predecessors (``<task>.log.N``)."""
    if not (log_file.exists() or log_file.with_name(f"{log_file.name}.1").exists()):
        return []
    removed = []
    for entry in log_file.parent.iterdir():
        if entry.name.startswith(log_file.name) and _ROTATED.fullmatch(
            entry.name[len(log_file.name) - len(".log") :]
        ):
            entry.unlink(missing_ok=True)
            removed.append(str(entry))
    return sorted(removed)
