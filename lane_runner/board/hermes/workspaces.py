"""What Hermes gives the worker: its context, its workspace, and where its log is read.

A Hermes board is a hosted board (``board/base.py`` ``HostedBoard``): the task's
workspace and the worker's context are Hermes's, made by Hermes's own calls.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from lane_runner.board.base import Creating, HostWorkspace, WorkspaceUnusable
from lane_runner.board.hermes import rows
from lane_runner.board.hermes.access import HermesAccess
from lane_runner.errors import NotFound

log = logging.getLogger(__name__)


class HermesWorkspaces(HermesAccess):
    """The hosted board's calls: context, workspace, worker log."""

    def worker_context(self, task_id: str) -> str:
        """Hermes's own worker context: body, prior attempts, parents' handoffs, comments."""
        return str(self._call(lambda c: self._kb.build_worker_context(c, task_id)))

    def prepare_workspace(self, task_id: str, creating: Creating) -> HostWorkspace:
        """The task's workspace by Hermes's kind (docs/ARCHITECTURE.md §5).

        ``scratch`` is Hermes's own directory for the task, and ``worktree`` Hermes's own
        worktree of it (made under ``creating``, so never beside another ``git worktree
        add`` of this runner in that repository), on the branch Hermes names
        (``branch_name``), where the result is committed. A ``dir:`` is the directory
        Hermes names, ``shared``: in a repository the runner works in its own worktree of
        it. Each is written back as Hermes does.
        """

        def work(connection: sqlite3.Connection) -> HostWorkspace:
            hermes_task = self._kb.get_task(connection, task_id)
            if hermes_task is None:
                raise NotFound(f"no task {task_id!r} on Hermes board {self.slug!r}")
            try:
                return self._workspace(connection, hermes_task, creating)
            except (ValueError, RuntimeError, OSError) as error:
                named = rows.workspace(hermes_task.workspace_kind, hermes_task.workspace_path)
                raise WorkspaceUnusable(f"Hermes workspace {named} is unusable: {error}") from error

        return self._call(work)

    def _workspace(
        self, connection: sqlite3.Connection, hermes_task: Any, creating: Creating
    ) -> HostWorkspace:
        kind = hermes_task.workspace_kind or "scratch"
        branch: str | None = None
        if kind == "worktree":
            repository = self._worktree_repository(hermes_task)
            # No repository named: Hermes's resolver refuses the task, nothing is made.
            with creating(repository) if repository else contextlib.nullcontext():
                path, branch = self._kb._resolve_worktree_workspace(hermes_task, board=self.slug)
            self._kb.set_branch_name(connection, hermes_task.id, branch)
        else:
            path = self._kb.resolve_workspace(hermes_task, board=self.slug)
        self._kb.set_workspace_path(connection, hermes_task.id, str(path))
        return HostWorkspace(Path(path), shared=kind == "dir", branch=branch)

    def _worktree_repository(self, hermes_task: Any) -> Path | None:
        """The repository Hermes makes a ``worktree`` task's worktree of: its path's, or
        the board's ``default_workdir``'s (the key of the runner's creation lock)."""
        anchor = hermes_task.workspace_path or self._kb.read_board_metadata(self.slug).get(
            "default_workdir"
        )
        if not anchor:
            return None
        requested = Path(str(anchor)).expanduser()
        return Path(self._kb._repo_root_for_worktree_target(requested) or requested)

    def record_workspace(self, task_id: str, path: Path) -> None:
        """Hermes's ``set_workspace_path``: ``hermes kanban show`` names the runner's worktree."""
        self._call(lambda c: self._kb.set_workspace_path(c, task_id, str(path)))

    def link_worker_log(self, task_id: str, log_file: Path) -> None:
        """Hermes's worker log of the task (``hermes kanban log``) becomes a link to ``log_file``.

        A log a Hermes worker left there is first rotated aside the way Hermes rotates
        its logs. Trouble here costs only Hermes's view of the log, which stays in the
        runner's home ('lane-runner logs'), so it is logged, not raised.
        """
        place = Path(self._kb.worker_log_path(task_id, board=self.slug))
        try:
            if place.is_symlink() and Path(os.readlink(place)) == log_file:
                return
            if place.exists() and not place.is_symlink():
                self._kb._rotate_worker_log(place, 0)
            place.parent.mkdir(parents=True, exist_ok=True)
            staged = place.with_name(f".{place.name}.{os.getpid()}.link")
            staged.unlink(missing_ok=True)
            os.symlink(log_file, staged)
            os.replace(staged, place)
        except OSError as error:
            log.warning("task %s: Hermes's worker log %s not linked: %s", task_id, place, error)
