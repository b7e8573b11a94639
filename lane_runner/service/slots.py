"""Per-provider caps beside the total ``concurrency``: ``max_running_<provider>``.

A run holds a slot of the provider it is routed to while it works; a run routed
to a provider at its cap either waits here for one of that provider's slots or
falls back (``provider_full``; the executor decides which). Caps are read at each
call, so a reload changes them at once; lowering a cap never stops running work,
it only keeps new work out until the count is under it again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping

from lane_runner.names import PROVIDERS


def cap_of(caps: Mapping[str, int], provider: str) -> int | None:
    """The cap of ``provider``; None when unlimited (0 in the configuration)."""
    return caps.get(provider) or None


class ProviderSlots:
    def __init__(
        self,
        caps: Callable[[], Mapping[str, int]],
        installed: Callable[[], Collection[str]] = lambda: PROVIDERS,
    ) -> None:
        """``installed`` names the providers this runner can start: one it cannot takes no
        run, so its having no cap leaves the room the others' caps make."""
        self._caps = caps
        self._installed = installed
        self._running = dict.fromkeys(PROVIDERS, 0)
        self._waiting = 0
        self._changed = threading.Condition()

    def acquire(self, provider: str) -> bool:
        """Take a slot of ``provider`` if one is free now."""
        with self._changed:
            cap = cap_of(self._caps(), provider)
            if cap is not None and self._running[provider] >= cap:
                return False
            self._running[provider] += 1
            return True

    def release(self, provider: str) -> None:
        with self._changed:
            self._running[provider] -= 1
            self._changed.notify_all()

    def wait(self, timeout: float) -> None:
        """Sleep until any slot is released or ``timeout`` passes; the caller tries again."""
        with self._changed:
            self._waiting += 1
            try:
                self._changed.wait(timeout)
            finally:
                self._waiting -= 1

    def room(self, claimed: int) -> int | None:
        """Runs the capped providers could still take, counting the ``claimed`` runs that
        hold no slot yet (routing, or waiting) as taking one each; None when a provider is
        uncapped (then the total ``concurrency`` is the only bound)."""
        caps, usable = self._caps(), [p for p in PROVIDERS if p in self._installed()]
        with self._changed:
            if any(cap_of(caps, provider) is None for provider in usable):
                return None
            free = sum(max(0, caps[p] - self._running[p]) for p in usable)
            unplaced = claimed - sum(self._running.values())
            return max(0, free - unplaced)

    def snapshot(self) -> dict[str, object]:
        """Running runs and the cap per provider, and how many runs wait for a slot."""
        caps = self._caps()
        with self._changed:
            return {
                "providers": {
                    p: {"running": self._running[p], "cap": cap_of(caps, p)} for p in PROVIDERS
                },
                "waiting": self._waiting,
            }
