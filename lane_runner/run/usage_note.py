"""Impossible usage figures, said in the run's comments (issue 48, item 6).

A CLI that reports a negative count, a fraction or 2**70 input tokens has not said what
it spent: the ledger records the kind as unknown (``providers/usage.py`` counts it 0 and
names it), and the run says so once per provider, so nobody reads a budget or a
``usage`` report built on it as complete. The CLI's usage callback runs while its pipe
is read; the comment waits for the attempt's end (``take``), never the pipe on a board.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


def impossible(provider: str, kinds: Iterable[str]) -> str:
    """The comment: which CLI, which kinds, and what that means for the figures."""
    return (f"{provider} reported an impossible number of {', '.join(sorted(kinds))} tokens "
            "(negative, not a whole number, or above 2**53): recorded as unknown, so this "
            "run's usage and the budgets that count it miss that spend")


class Unknown:
    """What was reported impossible during the run, until it is said."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, set[str]] = {}
        self._said: set[tuple[str, str]] = set()

    def add(self, provider: str, kinds: Iterable[str]) -> None:
        with self._lock:
            fresh = {kind for kind in kinds if (provider, kind) not in self._said}
            self._said.update((provider, kind) for kind in fresh)
            if fresh:
                self._pending.setdefault(provider, set()).update(fresh)

    def take(self) -> list[str]:
        """The comments not made yet, each once."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return [impossible(provider, kinds) for provider, kinds in sorted(pending.items())]
