"""The board contract every backend keeps (docs/ARCHITECTURE.md §5).

A ``Store`` holds boards (one SQLite file each, or rows in PostgreSQL); a
``Board`` holds tasks. Each method below says what it guarantees, which guard it
applies, what it returns and what it raises, in the manner of huey's
``BaseStorage``; ``tests/board/test_contract.py`` and the state machine hold every
backend to it. ``board/sql/`` implements it once for the SQL backends.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lane_runner.board.model import (
    Approval,
    BlockKind,
    BoardPause,
    Claim,
    Comment,
    CompleteOutcome,
    Event,
    Implemented,
    NewTask,
    Notice,
    NoticeState,
    Outcome,
    Run,
    Status,
    StopRequest,
    Task,
    TaskEdit,
)
from lane_runner.errors import LaneRunnerError


class BoardError(LaneRunnerError):
    """A board operation failed; the message says why and what to do (exit 1)."""


class BoardUnavailable(BoardError):
    """The board's storage cannot be reached or read right now (transient or corrupt).

    Callers skip this board and keep working on the others; the journal treats a
    commit that raised this as ``pending``.
    """


class WorkspaceUnusable(BoardError):
    """A hosted board's workspace for the task cannot be made; the task is blocked."""


class Board(Protocol):
    """One board's tasks and runs: the contract every backend keeps.

    Every method is one transaction: it happens entirely or not at all, and a
    method that raises wrote nothing. Methods that change a task hold the board's
    lock from before they read another task's state or write an event to their
    commit (``board/sql/``), so each sees every transition committed before it
    that its decision depends on, readers of events never skip one (below), and
    each appends exactly one event per task it
    changes (a hosted board's own calls may log more: Hermes's ``assigned``,
    ``heartbeat``).
    Guards are exact-run: an operation naming a run that is no longer its task's
    current run changes nothing and says so by its return value, never by raising.

    Every method may raise ``BoardUnavailable`` when the storage cannot be reached
    or stays locked for the whole wait budget (``board/retry.py``); nothing was
    written then, except that a commit whose answer was lost may have happened
    (the exact-run guards make a retry of it harmless). ``UsageError`` means the
    caller asked for something the rules refuse; ``NotFound`` names what is missing.
    """

    slug: str

    # -- tasks ---------------------------------------------------------------
    def add_task(self, new: NewTask) -> Task:
        """Create a task: ``ready`` when every parent is ``done`` (or it has none), else ``todo``.

        Guard: the id (given or fresh) is unused; every parent exists on this board,
        is not archived, and would not make the task its own ancestor. Returns the
        stored task; appends ``created``. Raises UsageError naming the first
        problem: a bad field, a taken id, a missing parent ("same board"), an
        archived parent, a cycle.
        """

    def get_task(self, task_id: str) -> Task:
        """The task as stored now. Raises NotFound."""

    def list_tasks(self, status: Status | None = None) -> list[Task]:
        """Every task (of one status), oldest first."""

    def comment(self, task_id: str, body: str, author: str = "operator") -> Comment:
        """Store a comment on the task (no event, no status change). Raises NotFound,
        UsageError for an empty, oversized or NUL-holding body."""

    def comments(self, task_id: str, limit: int | None = None) -> list[Comment]:
        """The task's comments, oldest first; with ``limit``, only the latest ``limit``.
        Raises NotFound."""

    def events(self, task_id: str | None = None, after_id: int = 0) -> list[Event]:
        """Events with an id above ``after_id`` (of one task, or of the board), in id order.

        A reader that remembers the last id it saw never misses a later event: events
        are returned only up to an id below which every event has committed (where
        events may commit out of id order, on PostgreSQL, the read waits for those in
        flight to settle). Raises NotFound for an unknown ``task_id``.
        """

    def runs(self, task_id: str) -> list[Run]:
        """The task's runs, oldest first. Raises NotFound."""

    def get_run(self, run_id: int) -> Run:
        """One run. Raises NotFound."""

    def unblock(self, task_id: str) -> Task:
        """A ``blocked`` task goes back to ``ready`` (``todo`` while a parent is not done).

        Clears the block and the failure count; appends ``unblocked``. Raises
        NotFound, UsageError when the task is not blocked or a parent is archived
        (the task would wait forever; nothing changes).
        """

    def archive(self, task_id: str) -> Task:
        """Retire a task that is not running; archiving an archived task returns it unchanged.

        Keeps its result and runs; appends ``archived`` (with the previous status).
        Its children never become ready. Raises NotFound, UsageError while running.
        """

    def retry(self, task_id: str, comment: str, author: str = "operator") -> Task:
        """``unblock`` with a comment, in one transaction: the operator says what changed,
        and the next run reads it with the task.

        Appends ``retried``. Raises NotFound, UsageError as ``unblock`` does, and for a
        comment ``comment`` would refuse.
        """

    def edit(self, task_id: str, edit: TaskEdit) -> Task:
        """Change what the task asks for: each field ``edit`` gives (``rules.EDITABLE``).

        Guard: the task is not running. The values follow ``add_task``'s rules. Appends
        ``edited`` naming the changed fields; an edit that changes nothing writes
        nothing. Raises NotFound, UsageError while running or for a bad value.
        """

    def delete(self, task_id: str, *, force: bool = False) -> Task:
        """Remove an archived task with its runs, events, comments and links; returns it
        as it was. ``force`` archives it first, in the same transaction.

        Guard: not running; no child that is neither done nor archived waits on it (its
        links to done or archived children go with it). Raises NotFound, UsageError.
        Run ids are never given again, so a journal record of a deleted run stays its own.
        """

    def counts(self) -> dict[str, int]:
        """How many tasks have each status (every status named, zero included)."""

    # -- the run lifecycle ----------------------------------------------------
    def claim(
        self,
        node: str,
        lease_ttl: float,
        default_assignee: str,
        skip_workspaces: Collection[str] = (),
        default_approval: Approval = Approval.NONE,
    ) -> Claim | None:
        """Start a run of the first claimable task, or None when there is none.

        Claimable: ``ready``, past its ``next_attempt_at``, assigned to a lane
        (unassigned tasks take ``default_assignee``; with none they are left
        alone), not in one of ``skip_workspaces`` (those the storm breaker marks
        broken: their tasks wait, untouched), and approved when its approval (its
        own, else ``default_approval``, the configuration's for the board) is
        ``before_run``: an unapproved one waits, untouched (docs/approvals.md). Order:
        priority (highest first), then age. The run gets an id larger than every
        earlier run of the board and a lease of ``lease_ttl`` seconds; the task
        becomes ``running``; appends ``claimed``. Two claimers never get the same task.
        Raises UsageError for a ``lease_ttl`` not above 0.
        """

    def heartbeat(self, run_id: int, lease_ttl: float) -> bool:
        """Renew the run's lease to now + ``lease_ttl``.

        Guard: exact-run (the run is open and its task's current run). Returns
        whether it was renewed; False means the lease is lost. No event.
        """

    def complete(
        self,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        metadata: dict[str, Any] | None = None,
    ) -> CompleteOutcome:
        """Record the run's result: the task becomes ``done`` and its waiting children ready.

        The guard (``rules.completion``) decides the outcome: ``COMPLETED`` for
        the current run; ``DUPLICATE`` (nothing written) when this run already
        completed with an equal result; ``REPLAYED`` when the run ended otherwise
        (reclaimed, expired, blocked) and nothing newer happened to the task since,
        so a result that outlived its lease still lands; ``STALE`` (nothing
        written) otherwise, unknown run ids included. On success: failure count
        and block cleared, appends ``completed`` or ``replayed``, then
        ``promoted`` for each child whose parents are now all done, in task id
        order. Never raises for a run it does not know. ``metadata`` is the
        journal record's (how the result was reached: route, sessions, goal turns,
        verdict, ``journal_digest``): the embedded boards store it with the
        ``completed`` or ``replayed`` event (``task show`` reads it); a hosted board
        keeps it with its completion.

        A hosted board completes only its host's current run (Hermes's
        ``expected_run_id``), so there an ended run is ``STALE``, never
        ``REPLAYED``; and the host promotes the children itself, in its own order.
        """

    def block(
        self, run_id: int, reason: str, kind: BlockKind, *, count_failure: bool = True
    ) -> bool:
        """End the run as ``blocked`` and block its task until someone unblocks it.

        Guard: exact-run. ``count_failure`` adds one to the failure count. Returns
        whether anything changed; appends ``blocked``.
        """

    def reclaim(
        self,
        run_id: int,
        reason: str,
        outcome: Outcome,
        *,
        count_failure: bool = False,
        cooldown: float | None = None,
    ) -> bool:
        """End the run with ``outcome`` and make its task claimable again.

        Guard: exact-run. ``cooldown`` seconds pass before the task is claimable.
        With ``count_failure``, a task reaching the failure limit is blocked as
        ``gave_up`` instead (appends ``gave_up``); otherwise appends
        ``reclaimed``. Returns whether anything changed. Raises UsageError for an
        ``outcome`` that is not a reclaim (``rules.RECLAIM_OUTCOMES``).
        """

    def running_runs(self, node: str | None = None) -> list[Run]:
        """Open runs (of one node), oldest first."""

    def expired_runs(self, now: float | None = None) -> list[Run]:
        """Open runs whose lease ended at or before ``now`` (default: the board's now)."""

    # -- operator controls (docs/ARCHITECTURE.md §5) ----------------------------

    def request_stop(self, task_id: str, reason: str, *, requeue: bool) -> Run:
        """Record a stop request on the task's current run (appends ``stop_requested``);
        UsageError when the task is not running. Nothing else changes here: the owning
        runner sees the request at its next heartbeat, kills the process tree and ends
        the run with ``reason``, blocked (``needs_input``) or, with ``requeue``, ready;
        never a counted failure. A later request replaces an earlier one."""

    def stop_request(self, run_id: int) -> StopRequest | None:
        """The stop requested for ``run_id``, while that run has not ended."""

    def pause(self, reason: str, by: str) -> BoardPause:
        """No runner claims from this board until ``resume``: ``claim`` answers None.
        Takes the board lock, so no claim commits after the pause does. Running work is
        not touched. Pausing again replaces the reason."""

    def resume(self) -> bool:
        """Lift the pause; True when there was one (other runners are told at once)."""

    def paused(self) -> BoardPause | None:
        """The pause in force, if any."""

    # -- the approval gate (docs/approvals.md) ------------------------------------

    def approve(
        self, task_id: str, by: str, note: str = "", code_step: int | None = None
    ) -> Task:
        """Record that ``by`` approved the task as it stands (appends ``approved`` with
        who and why). With ``code_step`` (the time step of the second factor's code that
        was checked), the code is used up on this board: a code used before is refused
        (UsageError, nothing written). Raises NotFound, UsageError for an archived task.
        """

    def deny(self, task_id: str, by: str, reason: str) -> Task:
        """Record that ``by`` refused the task (appends ``denied``); its approval is
        withdrawn, and a task waiting to run is blocked (``denied``) with the
        reason. Raises NotFound, UsageError while it runs (stop it first) or archived."""

    def close(self) -> None:
        """Release this board's own connections (a SQLite file's); the store stays usable."""


#: Held while a worktree of the repository is made (``run/workspace.py`` ``creating``).
Creating = Callable[[Path], AbstractContextManager[object]]


@dataclass(frozen=True)
class HostWorkspace:
    """Where a hosted task works, as its host says (docs/ARCHITECTURE.md §5).

    ``shared``: a directory the host would hand every task as it is (Hermes's ``dir:``).
    In a git repository the runner gives the task its own worktree of that repository
    instead (tasks of one repository never share a checkout), works at ``path``'s place
    inside it and tells the host (``record_workspace``); elsewhere it works in ``path``.
    ``branch``: the branch the host checked out there for the task (Hermes's
    ``worktree`` kind, its ``branch_name``), where the accepted result is committed.
    """

    path: Path
    shared: bool = False
    branch: str | None = None


@runtime_checkable
class HostedBoard(Protocol):
    """A board another system owns (Hermes): it says what the worker reads and where it works.

    The executor asks it instead of building the context and the git worktree
    itself. ``complete`` on such a board also keeps the journal record's
    ``metadata`` (route, sessions, ``journal_digest``), which the embedded
    boards leave in the journal, and hands the result's artifacts to the host.
    """

    def worker_context(self, task_id: str) -> str: ...
    def prepare_workspace(self, task_id: str, creating: Creating) -> HostWorkspace:
        """The task's workspace; a worktree the host makes itself is made under ``creating``."""

    def record_workspace(self, task_id: str, path: Path) -> None:
        """Tell the host where the task works now (the runner's worktree of its repository)."""

    def link_worker_log(self, task_id: str, log_file: Path) -> None:
        """Show the task's provider log where the host's users look for a worker's log."""

    def lane_counts(self, default_assignee: str) -> dict[str, int]:
        """``counts`` of the tasks this runner would serve: the host's own stay out."""


@runtime_checkable
class ReviewColumn(Protocol):
    """A board with a review column its host serves per lane (Hermes's ``review``): a
    result sent there waits for a reviewer, whose verdict ends the task done or hands it
    back to its implementer (``run/reviewcolumn.py``, docs/hermes.md)."""

    def claim_review(
        self, node: str, lease_ttl: float, busy: frozenset[str] = frozenset()
    ) -> Claim | None:
        """A review task of this runner's lanes, claimed as the host claims it (a run of
        its own), or None; tasks in ``busy`` (their implementer's run still ending here)
        are passed over."""

    def end_review(
        self, run_id: int, approved: bool, summary: str, findings: list[str]
    ) -> CompleteOutcome:
        """The verdict on review run ``run_id``: done, or back to the implementer with
        ``findings``; ``stale`` when the run is no longer the task's current one."""

    def hand_back_review(self, run_id: int, reason: str) -> bool:
        """Review run ``run_id`` ended without a verdict: the task waits in review again."""

    def release_hold(self, task_id: str, run_id: int) -> bool:
        """The hold run ``run_id``'s result keeps on its review while the run's follow-ups
        (push, ``after_done``) run, released: a reviewer may claim it now. A hold left
        expires with the run's lease."""

    def release_holds(self, node: str) -> int:
        """Every hold ``node``'s runs left (its process is gone); how many."""

    def implemented(self, task_id: str) -> Implemented | None:
        """The task's last accepted implementer result as the board keeps it (its
        provider, effort and base), or None when the board holds none of ours."""


@runtime_checkable
class ReviewRuns(Protocol):
    """A board on which a reviewer runs as a run of its own beside the implementer's (the
    SQL boards; issue 41, docs/verification.md): its own run id, node and lease, its role
    ``review``, the run it reviews; the task stays the implementer's run's."""

    def start_review_run(self, for_run: int, node: str, lease_ttl: float) -> Run | None:
        """A review run of run ``for_run``'s answer, leased for ``lease_ttl`` (its
        heartbeats renew it while ``for_run`` is its task's run); None when ``for_run``
        is no longer its task's current run."""

    def end_review_run(self, run_id: int, outcome: Outcome, reason: str) -> bool:
        """Review run ``run_id`` ended (``reviewed`` with its verdict, else how it
        failed); False when it had ended already (its implementer's run ended it)."""

    def end_leftover_review_runs(self, node: str) -> list[Run]:
        """Review runs of ``node`` left open (its daemon was killed), ended ``reclaimed``
        by that node's recovery; the runs it ended."""


@runtime_checkable
class SharedLedger(Protocol):
    """A board that keeps the usage ledger for every runner serving it (the SQL boards).

    The home's ledger (``usage/ledger.py``) is a runner's own; several runners on one
    board (pods, each with its home) count a task's and the board's day's spend
    together only through the board. Records are the home ledger's, keyed by their
    ``id``: storing one again changes nothing, so a runner re-sends whatever it is not
    sure the board took. A hosted board (Hermes) has no table of its own for them: it
    is not a ``SharedLedger``, and each runner's budgets count its home's records alone
    (docs/ARCHITECTURE.md §3.7).
    """

    def record_usage(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Store ``records`` (each with ``id``, ``task_id``, ``day``, ``at``) in one
        transaction; an id the board holds already is left as it is. Returns how many
        were new."""

    def usage(
        self, *, task_id: str | None = None, since_day: str | None = None
    ) -> list[dict[str, Any]]:
        """The stored records (of one task; of UTC days from ``since_day`` on), oldest
        first. Records of a deleted task stay (its spend was spent)."""


@runtime_checkable
class Outbox(Protocol):
    """A board that keeps the notifications of its events for every runner serving it
    (the SQL boards; docs/notifications.md).

    Entries are derived from the board's events behind a cursor the board keeps, so any
    runner (or a restarted one) carries on where the last left off; each is written
    before it is sent, and taken under a lease, so on a shared board one runner sends
    it at a time. An entry whose lease ran out (its sender died mid-send) is taken
    again: at least once, at most that one repeat, with the same id.
    """

    def outbox_cursor(self) -> int | None:
        """The id of the last event notifications were derived from; None: never."""

    def enqueue(self, notices: Sequence[Notice], cursor: int | None = None) -> int:
        """Store ``notices`` (an id the outbox holds already is left as it is) and, with
        ``cursor``, move the cursor up to it (never down), in one transaction. Returns
        how many were new."""

    def take_notice(self, node: str, lease: float) -> Notice | None:
        """The oldest pending entry that is due and nobody holds, leased to ``node`` for
        ``lease`` seconds; None when there is none."""

    def notice_sent(self, notice_id: str) -> bool:
        """Mark a pending entry sent (whoever holds it); False: it was not pending."""

    def notice_failed(self, notice_id: str, error: str, retry_in: float | None) -> bool:
        """Count a failed send: due again ``retry_in`` seconds from now, or dropped with
        None. False: it was not pending."""

    def release_notices(self, node: str) -> int:
        """Let go of every lease ``node`` holds (its sends died with its last process)."""

    def notices(self, state: NoticeState | None = None, limit: int = 100) -> list[Notice]:
        """The latest entries (of one state), newest first."""

    def prune_notices(self, before: float) -> int:
        """Remove the sent and dropped entries written before ``before`` (the cursor
        stays, so nothing is derived again); returns how many went."""


class Store(Protocol):
    """Where boards live. Backends: ``sqlite`` (default) and ``postgres``."""

    def create_board(self, slug: str) -> Board:
        """A new, empty board. Atomic: of two creators of one slug exactly one wins.
        Raises UsageError for an invalid or taken slug."""

    def delete_board(self, slug: str, *, force: bool = False) -> int:
        """Remove a board with every task on it; returns how many tasks went.

        Guard, checked in the transaction that empties it: no task is running; unless
        ``force``, every task is archived (``force`` archives them first). Raises
        NotFound, UsageError naming the tasks in the way.
        """

    def board(self, slug: str) -> Board:
        """An existing board (opened once, then shared). Raises NotFound (saying how to
        create it), BoardUnavailable when its storage cannot be read."""

    def board_slugs(self) -> Sequence[str]:
        """Every board's slug, sorted."""

    def wait_for_change(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True as soon as a board or the set of boards
        changed (a spurious True costs the caller one empty look, never a missed change)."""

    def close(self) -> None:
        """Release every connection and watch of the store."""
