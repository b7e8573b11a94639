"""What the tasks cost, per UTC day, board and provider, for the usage page's charts and
``/api/v1/usage``: the same records ``lane-runner usage`` reads (the boards' shared
ledgers merged with this home's), over the last ``days`` days."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from lane_runner.board.base import Store
from lane_runner.cli.commands import usage_cmd
from lane_runner.home import Home
from lane_runner.usage import spend
from lane_runner.web.charts import Bar

DEFAULT_DAYS = 14
BY = ("day", "board", "provider")


@dataclass(frozen=True)
class Costs:
    since: str
    rows: dict[str, list[dict[str, Any]]]
    """Per dimension of ``BY``: ``spend.summarize``'s rows."""
    total: dict[str, Any]

    def bars(self, by: str, figure: str) -> list[Bar]:
        """The chart of one dimension: ``cost_usd`` or ``total_tokens`` per value."""
        return [Bar(str(row[by]), float(row[figure] or 0)) for row in self.rows[by]]


def costs(store: Store, home: Home, now: float, days: int = DEFAULT_DAYS) -> Costs:
    today = datetime.datetime.fromtimestamp(now, datetime.UTC).date()
    since = (today - datetime.timedelta(days=days - 1)).isoformat()
    chosen = usage_cmd.selected(usage_cmd.records(store, home, None, since), None, since, None)
    return Costs(
        since, {by: spend.summarize(chosen, (by,)) for by in BY}, spend.total(chosen).to_dict()
    )
