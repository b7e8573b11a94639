"""What a run spends, against its budgets (docs/ARCHITECTURE.md §3.7): the usage the
CLI reports, put in the home's ledger as it comes; the ledger shared with the board, so
other runners' spend counts too; the budget crossed, which ends the attempt.

The arithmetic is ``usage/``'s (``budget``, ``ledger``, ``spend``); this room only keeps the run's
copy of the board's records and carries their answers out.
"""

from __future__ import annotations

import logging
from typing import Any

from lane_runner import clock
from lane_runner.board.base import BoardUnavailable
from lane_runner.providers import UsageReport
from lane_runner.run import usage_note
from lane_runner.run.claimed import Claimed
from lane_runner.service import metrics
from lane_runner.usage import budget, ledger, share
from lane_runner.usage.record import Record, Role, day_of
from lane_runner.usage.spend import Spend, Totals, merged

log = logging.getLogger(__name__)


class Spending:
    def __init__(self, claimed: Claimed) -> None:
        self.c = claimed
        budgets, task = claimed.settings.budgets, claimed.task
        self.budget = budget.of(
            task.max_cost_usd, task.max_tokens, budgets.max_cost_usd, budgets.max_tokens,
            budgets.daily_budget_usd, task.board,
        )
        self.over_budget: str | None = None  # why the spend crossed the budget, once it did
        self.unknown_usage = usage_note.Unknown()  # impossible usage figures, to comment on
        # The board's copy of the usage ledger: the task's records and the board's today's,
        # as last read (``share``); what budgets read with the home's own records.
        self.on_board: list[Record] = []

    def spend(self) -> tuple[Totals, Totals]:
        """The task's spend over all its runs, and its board's over today (UTC), on every
        runner of the board: the board's copy as last read, and the home's own records
        (those not sent yet too). Reads no board: the CLI's pipe calls it."""
        spend = self.records()
        return spend.task(self.c.task.id), spend.on_day(clock.now())

    def records(self) -> Spend:
        return Spend.of(self.on_board, self.c.s.ledger.records(self.c.task.board))

    def share(self, *, whole_task: bool = False) -> None:
        """Send the home's unsent usage records to the board, and read back the board's
        records that the budgets count (the task's, today's), which other runners' spend
        is in; ``whole_task``: the task's in any case (the completed event's summary).
        Without a budget a heartbeat reads nothing back: on a fleet's board, a day's
        records read at every heartbeat of every run would be the board's heaviest read.
        Best effort: a board that is away keeps the last copy read, the records stay
        unsent in the home (fsynced) and go at the next share, the sweep or recovery."""
        c, limits = self.c, self.budget
        task = whole_task or limits.max_cost_usd is not None or limits.max_tokens is not None
        try:
            with c.s.resting.use(c.task.board):
                share.send(c.board, c.s.ledger)
                today = day_of(clock.now())
                self.on_board = merged(
                    share.on_board(c.board, task_id=c.task.id) if task else [],
                    share.on_board(c.board, since_day=today)
                    if limits.daily_usd is not None else [],
                )
        except BoardUnavailable as error:
            log.info("usage of %s/%s not shared with the board now (sent later): %s",
                     c.task.board, c.task.id, error)
        except OSError as error:  # the marks file: the records are sent again next time
            log.warning("usage marks of board %s not written: %s", c.task.board, error)

    def crossed(self) -> str | None:
        return budget.crossed(self.budget, *self.spend())

    def spent_before_any_cli(self) -> str | None:
        """Why the budget is spent already, as the board is told (a block), or None."""
        crossed = self.crossed()
        return None if crossed is None else budget.spent_reason(crossed, answered=False)

    def spent_in_attempt(self, answered: bool) -> str | None:
        """Why the attempt's spend crossed the budget (it was ended for it), or None;
        ``answered``: the attempt's answer was accepted all the same."""
        over = self.over_budget
        return None if over is None else budget.spent_reason(over, answered)

    def dollars_left(self) -> float | None:
        """What the CLI may still spend (its own ``max_budget_usd``), if a budget says."""
        return budget.dollars_left(self.budget, *self.spend())

    def on_usage(self, provider: str, n: int, report: UsageReport, role: Role) -> None:
        """Put what the CLI just said it spent in the ledger, durably, before anything else
        happens to the attempt, as spent in ``role`` (an implementer's or a reviewer's
        turn: the task's spend by role is the ledger's); a spend past the budget ends the
        attempt's tree."""
        c = self.c
        attempt = ledger.Attempt(c.task.board, c.task.id, c.run.id, n, provider, role)
        try:
            added = c.s.ledger.record(attempt, report, c.settings.budgets.prices, clock.now())
        except OSError as error:
            # The attempt goes on: stopping it would waste what was spent. Only this
            # figure is missing from the ledger, and the log says so.
            log.error("usage of %s/%s run %s attempt %s not recorded: %s", c.task.board,
                      c.task.id, c.run.id, n, error)
            return
        metrics.spent(added)
        c.s.activity.spent(
            c.run.id,
            sum(sum(r.tokens.values()) for r in added),
            sum(r.cost_usd or 0.0 for r in added),
        )
        if report.unknown:
            log.warning("run %s: %s", c.run.id, usage_note.impossible(provider, report.unknown))
            self.unknown_usage.add(provider, report.unknown)
        why = self.crossed() if added else None
        if why is not None and self.over_budget is None:
            log.info("run %s: %s; ending the attempt", c.run.id, why)
            self.over_budget = why
            c.cancel.set()

    def summary(self) -> dict[str, Any]:
        """What the task (on every runner) and this run spent, for the completed event;
        ``by_role`` is the task's, as the ledger's records say their role."""
        self.share(whole_task=True)
        spend = self.records()
        task = spend.task_usage(self.c.task.id)
        return {"task": task, "run": spend.run(self.c.run.id).to_dict(),
                "by_role": task["by_role"]}
