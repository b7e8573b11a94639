"""The pool of worker users (``worker_users``): each running slot gets a user of its own.

With one ``worker_user`` every task runs as the same user, so a task's code can rename
a forged answer over a neighbour's result file, write files into its worktree that the
runner then commits as the neighbour's result, or kill its processes (issue 47, case 2).
With a pool, two runs in flight never share a user: what one task's code can write is
what its own user owns, and a neighbour's worktree, made by another user, is out of its
reach where the operator keeps its modes private (docs/security.md, "A pool of users").

The pool decides only who runs a run; everything the run does as its worker reads that
user from the run's configuration (``for_run``), taken at the claim and kept to its end.
"""

from __future__ import annotations

import logging
import os
import pwd
import threading
from collections.abc import Collection, Sequence
from pathlib import Path

from lane_runner.config import Config
from lane_runner.errors import UsageError

log = logging.getLogger(__name__)


def choose(users: Sequence[str], busy: Collection[str]) -> str | None:
    """The first user of the pool no run in flight holds; None when all are held.

    The first rather than any: a slot's runs then keep landing on the same few users,
    whose CLI homes already hold their logins and caches."""
    return next((user for user in users if user not in busy), None)


def check_users(users: Sequence[str]) -> None:
    """Refuse a pool naming a user that does not exist or is root: every run of that
    slot would fail, or run the agent's code with every privilege."""
    for user in users:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise UsageError(
                f"worker_users names {user!r}, which does not exist: create it "
                f"(useradd --system --create-home {user}) or remove it from the pool"
            ) from None
        if entry.pw_uid == 0:
            raise UsageError(f"worker_users names {user!r}, whose uid is 0: a pool user "
                             "must be unprivileged")


def probe_user(cfg: Config) -> str | None:
    """Who runs a CLI's ``--version``: ``worker_user``, else the pool's first user (a
    pool without ``worker_user`` must not have root run the CLI)."""
    return cfg.worker_user or next(iter(cfg.worker_users), None)


def owner_of(worktree: Path, cfg: Config) -> str | None:
    """Who the runner's git works as in ``worktree`` outside a run (the cleanup sweep,
    recovery): with a pool, the pool user owning it (each task's worktree is its last
    run's user's, ``run/ownership.py``), so git's ownership check passes and root never
    works in a worker's files; else, or for a worktree no pool user owns, ``worker_user``."""
    if not cfg.worker_users:
        return cfg.worker_user
    try:
        name = pwd.getpwuid(os.lstat(worktree).st_uid).pw_name
    except (OSError, KeyError):
        return cfg.worker_user
    return name if name in cfg.worker_users else cfg.worker_user


class WorkerPool:
    """Which pool user each run in flight holds; thread-safe (claims and reaps run on
    the daemon's loop, a crashed run's release may come from elsewhere)."""

    def __init__(self, users: Sequence[str]) -> None:
        self.users = tuple(users)
        self._held: dict[int, str] = {}  # run id -> user
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """How many runs the pool lets run at once; 0 when there is no pool."""
        return len(self.users)

    def cap(self, slots: int) -> int:
        """``slots`` bounded by the pool: a run never waits for a user after its claim."""
        return min(slots, self.size) if self.users else slots

    def lease(self, run_id: int) -> str | None:
        """A user for ``run_id`` (the one it holds already, on a second call), or None
        when there is no pool or every user is held."""
        with self._lock:
            if run_id in self._held:
                return self._held[run_id]
            user = choose(self.users, set(self._held.values()))
            if user is not None:
                self._held[run_id] = user
            return user

    def release(self, run_id: int) -> None:
        with self._lock:
            self._held.pop(run_id, None)

    def held(self) -> dict[int, str]:
        with self._lock:
            return dict(self._held)

    def for_run(self, cfg: Config, run_id: int) -> Config:
        """``cfg`` with ``worker_user`` set to the user leased for ``run_id``: every room
        of the run (the CLI, hooks, checks, the runner's git) then works as that user.
        Unchanged without a pool; a pool with no free user is the daemon's error (its
        slots are capped by the pool), raised rather than run as the shared user."""
        if not self.users:
            return cfg
        user = self.lease(run_id)
        if user is None:
            raise RuntimeError(f"no worker user free for run {run_id}: {self.held()}")
        log.info("run %s works as pool user %s", run_id, user)
        return cfg.replace(worker_user=user)
