"""Where a run works (docs/ARCHITECTURE.md §1, §5): the task's git worktree on its
branch, or the hosting board's workspace (a repository's is our own worktree of it,
worked in at the same place); the room its repository's disk has; and the board's hooks
run in it as the worker user (``run/hooks.py``).
"""

from __future__ import annotations

import logging

from lane_runner.board.base import HostedBoard
from lane_runner.errors import NotFound
from lane_runner.run import delivery, hooks, workspace
from lane_runner.run.claimed import Claimed
from lane_runner.run.notebook import Notebook
from lane_runner.service import disk

log = logging.getLogger(__name__)


class Workplace:
    def __init__(self, claimed: Claimed, notebook: Notebook) -> None:
        self.c, self.notebook = claimed, notebook

    def prepare(self) -> workspace.Workspace:
        """The hosting board's workspace for the task (Hermes's kinds), else our git worktree;
        the run works there from now on (``Claimed.worktree``, ``cwd``, ``branch``)."""
        c = self.c
        board = c.board
        prepared = (
            self._hosted(board) if isinstance(board, HostedBoard)
            else self._own_worktree(c.task.workspace)
        )
        c.worktree, c.cwd = prepared.path, prepared.cwd
        c.branch = prepared.branch or c.branch
        c.on_branch = prepared.branch is not None
        if prepared.taken_over_from is not None:
            self.notebook.note(
                f"took over the worktree an earlier run left at {prepared.taken_over_from}"
            )
        if c.on_branch and c.state.base is None:
            c.state.base = prepared.head or delivery.head(c.worktree, c.settings.worker.user)
        return prepared

    def _own_worktree(self, repository: str | None) -> workspace.Workspace:
        c = self.c
        return workspace.prepare(
            repository,
            c.s.home.worktree(c.task.board, c.task.id),
            workspace.branch_name(c.task.board, c.task.id),
            owner=c.settings.worker.user,
            run=c.run.id,
            is_current=self._run_is_current,
            pooled=bool(c.cfg.worker_users),
            fresh=c.state.base is None,  # no run of the task prepared its worktree yet
        )

    def _hosted(self, board: HostedBoard) -> workspace.Workspace:
        """The host's workspace, and where the accepted result is committed
        (docs/ARCHITECTURE.md §5, §6): a host's worktree on the branch it names; a
        repository's ``dir:`` in this runner's own worktree of it on the task's branch,
        worked in at the same place, the host told where (the user's checkout is never
        edited); a directory outside git (Hermes's ``scratch``) as it is, no commit."""
        c = self.c
        board.link_worker_log(c.task.id, c.s.home.log_file(c.task.board, c.task.id))
        owner = c.settings.worker.user
        hosted = board.prepare_workspace(
            c.task.id, lambda repository: workspace.creating(repository, owner)
        )
        top = workspace.repository_of(hosted.path, owner) if hosted.shared else None
        if top is None:
            return workspace.Workspace(hosted.path, branch=hosted.branch)
        own = self._own_worktree(str(top))
        folder = hosted.path.resolve().relative_to(top.resolve()).as_posix()
        if folder == "." or not (own.path / folder).is_dir():
            folder = ""  # a directory git does not track is not in the worktree
        inside = workspace.Workspace(
            own.path, own.taken_over_from, branch=own.branch, folder=folder, created=own.created,
            head=own.head,
        )
        self.notebook.guarded(board.record_workspace, c.task.id, inside.cwd)
        return inside

    def _run_is_current(self, run_id: int) -> bool:
        """Whether another run of this board still holds its claim (its worktree is not ours)."""
        try:
            return self.c.board.get_run(run_id).ended_at is None
        except NotFound:
            return False  # a run of no board we know: its worktree is stale

    def no_room(self) -> str | None:
        """Why the task's repository has too little free space for a run, or None. The
        daemon's disk guard measures only the repositories it has claimed in, so the first
        task of one is measured here: handed back uncounted, it teaches the daemon to
        hold claims until there is room (``service/disk.py``)."""
        task = self.c.task
        if not task.workspace or isinstance(self.c.board, HostedBoard):
            return None
        spaces = disk.measure([task.workspace])
        return disk.shortage(spaces, self.c.settings.min_free_disk_mb)

    def before_work(self, prepared: workspace.Workspace) -> hooks.Ran | None:
        """``after_create`` for a worktree this run made, then ``before_run``: the first
        that fails, or None."""
        for name in ("after_create", "before_run"):
            if name == "after_create" and not prepared.created:
                continue
            ran = self.hook(name)
            if ran is not None and ran.fatal:
                return ran
        return None

    def hook(self, name: str, summary: str = "") -> hooks.Ran | None:
        """Run the board's hook ``name`` in the worktree; a failure that does not fail the
        attempt is commented (``run/hooks.py``)."""
        c, worker = self.c, self.c.settings.worker
        if not hooks.configured(worker.hooks, c.task.board).get(name):
            return None
        facts = hooks.Facts(
            board=c.task.board,
            task_id=c.task.id,
            title=c.task.title,
            branch=c.branch if c.on_branch else "",
            worktree=c.worktree,
            run_id=c.run.id,
            commit=delivery.head(c.worktree, worker.user) if c.on_branch else None,
            summary=summary,
        )
        ran = hooks.run(worker.hooks, name, facts, owner=worker.user, passes=worker.env,
                        egress=worker.egress)
        if ran is not None and not ran.ok and not ran.fatal:
            self.notebook.note(ran.describe())
        return ran
