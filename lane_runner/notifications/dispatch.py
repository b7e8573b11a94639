"""The sender: the board's events turned into outbox entries, and the entries sent, on
a thread of its own so no send ever delays a run or the daemon's loop
(docs/notifications.md).

Each pass, per board with ``notify`` configured: the events after the board's cursor
become entries (written, and the cursor moved, in one transaction: ``Outbox.enqueue``);
ready work waiting too long and the storm breaker's marks become entries with ids made
from what they are about; then due entries are taken one at a time under a lease, sent,
and marked sent after the send, or failed with a backoff, or dropped after
``notify_attempts``. A kill between the send and its mark repeats that one send, with
the same id; nothing else is sent twice, and nothing written is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, cast

from lane_runner.board.base import Board, BoardUnavailable, Outbox, SharedLedger, Store
from lane_runner.board.model import Event, Notice, Status, Task
from lane_runner.config import Config, people
from lane_runner.errors import NotFound
from lane_runner.notifications import notices, sender
from lane_runner.notifications.notices import Kind, Message
from lane_runner.service import approvals, breaker, metrics
from lane_runner.usage import budget, record, share, spend

log = logging.getLogger(__name__)

#: Seconds a sender holds an entry it took: far above Apprise's own timeouts, so only a
#: sender that died lets an entry go to another.
LEASE = 120.0
#: The first retry's delay, doubled each failure up to ``BACKOFF_MAX``.
BACKOFF_BASE = 5.0
BACKOFF_MAX = 3600.0
#: Events read per pass, entries sent per board per pass (the others wait a pass).
EVENTS_PER_PASS = 500
SENDS_PER_PASS = 20
#: Seconds between passes while nothing is due, and between looks at waiting work.
IDLE = 1.0
WATCH_INTERVAL = 60.0
#: Seconds a stopping daemon gives the last pass (``Dispatcher.stop``).
STOP_WAIT = 15.0
#: Sent and dropped entries are kept this long (``notify ls``), then pruned.
KEEP_SECONDS = 30 * 86400.0
#: Every board without an entry of its own takes this one's.
EVERY_BOARD = "*"

Send = Callable[[str, Message], "str | None"]


class OutboxBoard(Board, Outbox, Protocol):
    """A board that keeps an outbox (the SQL boards)."""


@dataclass(frozen=True)
class Route:
    """Who hears of what on one board (``notify.<board>``, else ``notify."*"``)."""

    urls: tuple[str, ...]
    events: frozenset[str]
    not_claiming_minutes: float

    @classmethod
    def of(cls, cfg: Config, board: str) -> Route | None:
        entry = cfg.notify.get(board, cfg.notify.get(EVERY_BOARD))
        if not entry:
            return None
        return cls(
            tuple(entry["urls"]), frozenset(entry["events"]), float(entry["not_claiming_minutes"])
        )

    def url(self, destination: str) -> str | None:
        return next((u for u in self.urls if people.destination(u) == destination), None)


def backoff(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed sends (pure)."""
    return float(min(BACKOFF_MAX, BACKOFF_BASE * 2 ** max(0, attempts - 1)))


class Dispatcher:
    """The outbox's sender thread for one runner (``start``, ``wake``, ``stop``)."""

    def __init__(
        self,
        store: Store,
        node: str,
        config: Callable[[], Config],
        trips: Callable[[], Mapping[str, breaker.Trip]] = dict,
        send: Send = sender.send,
    ) -> None:
        self.store = store
        self.node = node
        self.config = config
        self.trips = trips
        self.send = send
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._released: set[str] = set()
        self._watched: dict[str, float] = {}
        self._unsupported: set[str] = set()

    # -- the thread ---------------------------------------------------------------
    def start(self) -> None:
        """Take the first look now, before the daemon claims anything (so the first
        start's runs are told of), then serve on a thread of its own."""
        try:
            self.turn(send=False)
        except Exception:  # noqa: BLE001 - the thread's passes try again
            log.exception("notification outbox not reachable at start; trying again")
        self._thread = threading.Thread(target=self._loop, name="notify", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = STOP_WAIT) -> None:
        """One last pass, then stop: the runs that just ended are told of (``run
        --until-idle`` exits right after them). What that pass cannot send in ``timeout``
        seconds stays in the outbox for the next start."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            try:
                busy = self.turn()
            except Exception:  # noqa: BLE001 - the sender outlives any one failure
                log.exception("notification pass failed; the next pass tries again")
                busy = False
            if self._stop.is_set():
                return  # that pass began after the stop: the last one
            if not busy:
                self._wake.wait(IDLE)
                self._wake.clear()

    # -- one pass -------------------------------------------------------------------
    def turn(self, send: bool = True) -> bool:
        """One pass over the boards; True when it sent (or failed) something."""
        cfg = self.config()
        if not cfg.notify:
            return False
        busy = False
        for slug in self.store.board_slugs():
            route = Route.of(cfg, slug)
            if route is None:
                continue
            try:
                board = self.store.board(slug)
                if not isinstance(board, Outbox):
                    self._unsupported_board(slug)
                    continue
                outbox = cast(OutboxBoard, board)
                if send:
                    busy |= self._serve(outbox, route, cfg.notify_attempts)
                else:
                    self.derive(outbox, route)
            except (BoardUnavailable, NotFound) as error:
                log.debug("notifications of board %s wait: %s", slug, error)
        return busy

    def _serve(self, board: OutboxBoard, route: Route, attempts: int) -> bool:
        if board.slug not in self._released:
            # This node's leases died with its last process: its entries go out now.
            released = board.release_notices(self.node)
            if released:
                log.info("board %s: %d notifications left in flight are sent again",
                         board.slug, released)
            self._released.add(board.slug)
        self.derive(board, route)
        now = time.time()
        if now - self._watched.get(board.slug, 0.0) >= WATCH_INTERVAL:
            self._watched[board.slug] = now
            self.watch(board, route, now)
            board.prune_notices(now - KEEP_SECONDS)
        return self.send_due(board, route, attempts)

    def _unsupported_board(self, slug: str) -> None:
        if slug not in self._unsupported:
            self._unsupported.add(slug)
            log.warning("board %s keeps no notification outbox (a hosted board): its "
                        "notifications are not sent; docs/notifications.md", slug)

    # -- derive ---------------------------------------------------------------------
    def derive(self, board: OutboxBoard, route: Route) -> int:
        """The events after the cursor as entries; the first look starts at the newest
        event (what happened before notifications were configured is not sent)."""
        cursor = board.outbox_cursor()
        if cursor is None:
            events = board.events()
            return board.enqueue([], events[-1].id if events else 0)
        events = board.events(after_id=cursor)[:EVENTS_PER_PASS]
        if not events:
            return 0
        tasks: dict[str, Task | None] = {}
        messages: list[tuple[Message, float]] = []
        for event in events:
            kind = notices.kind_of(event)
            if kind is not None and kind.value in route.events:
                message = notices.from_event(event, self._task(board, event, tasks),
                                             self._cost(board, event, kind))
                messages += [(message, event.at)] if message is not None else []
            waiting = self._waiting(board, event, tasks, route)
            if waiting is not None:
                messages.append(waiting)
        entries = [n for m, at in messages for n in notices.notices(m, list(route.urls), at)]
        return board.enqueue(entries, events[-1].id)

    def _waiting(
        self, board: OutboxBoard, event: Event, tasks: dict[str, Task | None], route: Route
    ) -> tuple[Message, float] | None:
        """``approval_needed`` when the task waits for approval since ``event`` (as the
        board has it now: one approved meanwhile is not asked about)."""
        if (Kind.APPROVAL_NEEDED.value not in route.events
                or event.kind not in notices.APPROVAL_MOMENTS):
            return None
        task = self._task(board, event, tasks)
        waiting = approvals.awaiting(self.config(), task) if task is not None else None
        if task is None or waiting is None or task.status is Status.TODO:
            return None  # a task waiting for its parents is asked about once promoted
        return notices.approval_needed(event, task, waiting), event.at

    @staticmethod
    def _task(board: Board, event: Event, tasks: dict[str, Task | None]) -> Task | None:
        if event.task_id not in tasks:
            try:
                tasks[event.task_id] = board.get_task(event.task_id)
            except NotFound:
                tasks[event.task_id] = None
        return tasks[event.task_id]

    @staticmethod
    def _cost(board: Board, event: Event, kind: Kind) -> float | None:
        """The task's spend: the completion's own figure, else the board's ledger."""
        if kind is Kind.DONE:
            return notices.cost_of(event)
        if not isinstance(board, SharedLedger):
            return None
        found = record.from_board(board.usage(task_id=event.task_id), board.slug)
        if not found:
            return None
        return spend.total(found).cost_usd

    def watch(self, board: OutboxBoard, route: Route, now: float) -> int:
        """Ready work nobody claims, the board's day's budget spent, and the storm
        breaker's marks, as entries."""
        messages: list[Message] = []
        cfg = self.config()
        if Kind.NOT_CLAIMING.value in route.events:  # one waiting for approval is not
            ready = [t for t in board.list_tasks(Status.READY) if not approvals.awaiting(cfg, t)]
            late = notices.not_claiming(board.slug, ready, now, route.not_claiming_minutes)
            messages += [late] if late is not None else []
        if Kind.BUDGET_SPENT.value in route.events:
            why = budget.board_spent(cfg.daily_budget_usd, board.slug,
                                     share.spent_today(board, [], now))
            if why is not None:
                messages.append(notices.day_budget_spent(board.slug, why, record.day_of(now)))
        if Kind.BREAKER_TRIPPED.value in route.events:
            for where, trip in self.trips().items():
                if _on_board(where, board.slug):
                    messages.append(
                        notices.breaker_tripped(board.slug, where, trip.reason, trip.tripped_at)
                    )
        entries = [n for m in messages for n in notices.notices(m, list(route.urls), now)]
        return board.enqueue(entries) if entries else 0

    # -- send -----------------------------------------------------------------------
    def send_due(self, board: OutboxBoard, route: Route, attempts: int) -> bool:
        busy = False
        for _ in range(SENDS_PER_PASS):
            notice = board.take_notice(self.node, LEASE)
            if notice is None:
                break
            busy = True
            self._send_one(board, notice, route, attempts)
        return busy

    def _send_one(self, board: OutboxBoard, notice: Notice, route: Route, attempts: int) -> None:
        message = Message.from_dict(notice.data)
        url = route.url(str(notice.data.get("destination", "")))
        try:
            error = ("its destination is no longer configured" if url is None
                     else self.send(url, message))
            final = url is None
        except sender.Unsendable as unsendable:
            error, final = str(unsendable), True
        if error is None:
            board.notice_sent(notice.id)
            metrics.NOTIFICATIONS.labels(notice.board, notice.kind, "sent").inc()
            log.info("notification %s sent", notice.id)
            return
        tried = notice.attempts + 1
        if final or tried >= attempts:
            board.notice_failed(notice.id, error, None)
            metrics.NOTIFICATIONS.labels(notice.board, notice.kind, "dropped").inc()
            log.warning("notification %s dropped after %d attempts: %s", notice.id, tried, error)
            return
        board.notice_failed(notice.id, error, backoff(tried))
        metrics.NOTIFICATIONS.labels(notice.board, notice.kind, "failed").inc()
        log.info("notification %s failed (attempt %d of %d), retried in %.0f s: %s",
                 notice.id, tried, attempts, backoff(tried), error)


def _on_board(where: str, slug: str) -> bool:
    """A breaker scope that concerns ``slug``: the board, a workspace of it, or a
    provider (every board's runs use it)."""
    kind = where.partition(":")[0]
    return (
        where == breaker.scope(breaker.BOARD, slug)
        or breaker.workspace_of(where, slug) is not None
        or kind not in (breaker.BOARD, breaker.WORKSPACE)
    )
