"""A pull request named in a task holds a second run of it for a day (issue 42).

A worker that opened a pull request says so in a comment or in its result's metadata;
another run of the task meanwhile would do the same work twice beside that pull request.
Hermes's own dispatcher holds such a task for 24 hours after the pull request is named
(its "active PR" guard); a lane holds it the same way, and says why on the task. Pure:
the board reads the mentions, this decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: How long a named pull request holds the task (Hermes's guard: 24 h).
WINDOW_SECONDS = 86400.0
#: A GitHub pull request's address, as Hermes's guard recognises one.
ADDRESS = re.compile(r"https?://github\.com/[^/\s\"']+/[^/\s\"']+/pull/\d+", re.IGNORECASE)


@dataclass(frozen=True)
class Mention:
    """Text that may name a pull request: a comment, or an ended run's result metadata."""

    text: str
    at: float
    where: str


@dataclass(frozen=True)
class Hold:
    """The task is held until ``until``: ``url`` was named in ``where`` at ``named_at``."""

    url: str
    named_at: float
    where: str

    @property
    def until(self) -> float:
        return self.named_at + WINDOW_SECONDS

    def describe(self) -> str:
        """The reason shown on the task (one comment per pull request)."""
        return (
            f"held: pull request {self.url} (named in {self.where}) is less than 24 h old; "
            "no second run of this task until a day after it was named, so the work is not "
            "done twice beside it"
        )


def hold(mentions: Iterable[Mention], now: float) -> Hold | None:
    """The hold the newest pull request named within the window puts on the task, or None."""
    newest: Hold | None = None
    for mention in mentions:
        if now - mention.at >= WINDOW_SECONDS:
            continue
        found = ADDRESS.search(mention.text)
        if found and (newest is None or mention.at > newest.named_at):
            newest = Hold(found.group(0), mention.at, mention.where)
    return newest
