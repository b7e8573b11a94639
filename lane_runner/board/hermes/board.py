"""One Hermes board as the board contract: its concerns, one module each, on one base.

Every write goes through Hermes's own calls (``claim_task``, ``heartbeat_claim``,
``heartbeat_worker``, ``complete_task``, ``block_task``, ``add_comment``) so Hermes's
events, hooks, child promotion and scratch clean-up happen as for its own workers.
Where upstream offers no exact-run guard (``reclaim_task`` takes no run id), the
transition is written in one of Hermes's own write transactions, guarded on the
task's current run, with Hermes's own run and event writers (``release.py``).
Exactly once is ``completion.py``'s; the connection per operation is ``access.py``'s.
"""

from __future__ import annotations

from lane_runner.board.hermes.claims import HermesClaims
from lane_runner.board.hermes.completion import HermesCompletion
from lane_runner.board.hermes.reads import HermesReads
from lane_runner.board.hermes.refusals import HermesRefusals
from lane_runner.board.hermes.release import HermesRelease
from lane_runner.board.hermes.reviews import HermesReviews
from lane_runner.board.hermes.workspaces import HermesWorkspaces


class HermesBoard(
    HermesClaims,
    HermesCompletion,
    HermesRelease,
    HermesReviews,
    HermesWorkspaces,
    HermesReads,
    HermesRefusals,
):
    """One Hermes board (one ``kanban.db``). Methods are safe to call from several threads.

    Each concern is its own module of this package, on the one base, ``HermesAccess``.
    """
