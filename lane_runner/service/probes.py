"""Whether the daemon is alive and ready, as ``/healthz`` and ``/readyz`` answer it.

The pod's counterpart of the systemd watchdog (``notify.py``): a kubelet cannot read
``WATCHDOG=1``, so the loop also stamps each healthy turn here and the probes on the
metrics listener judge from the stamp. Ready means recovery is over and the loop
serves; alive means the loop completed a healthy turn within ``health_timeout``
(a turn that raised, like one that hangs, does not count: the watchdog's rule).
While recovering and while stopping the daemon is alive whatever the loop does:
a long journal replay or a shutdown grace must not get it killed.

The daemon's main thread writes, the listener's threads read: each field is one
reference replaced whole, so a reader sees an old value or a new one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum


class Phase(Enum):
    RECOVERING = "recovering"
    SERVING = "serving"
    STOPPING = "stopping"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str


class Health:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.phase = Phase.RECOVERING
        self.turned_at = time.monotonic()

    def serving(self) -> None:
        """Recovery is over: the loop starts, and owes its first turn from now."""
        self.turned_at = time.monotonic()
        self.phase = Phase.SERVING

    def turned(self) -> None:
        """The loop completed a healthy turn."""
        self.turned_at = time.monotonic()

    def stopping(self) -> None:
        self.phase = Phase.STOPPING

    def live(self) -> Verdict:
        return liveness(self.phase, time.monotonic() - self.turned_at, self.timeout)

    def ready(self) -> Verdict:
        if self.phase is Phase.SERVING:
            return Verdict(True, "serving")
        return Verdict(False, self.phase.value)


def liveness(phase: Phase, since_turn: float, timeout: float) -> Verdict:
    """Alive unless serving and the last healthy turn is more than ``timeout`` s old."""
    if phase is not Phase.SERVING:
        return Verdict(True, phase.value)
    if since_turn > timeout:
        return Verdict(
            False, f"the loop has not completed a healthy turn for {since_turn:.0f} s"
        )
    return Verdict(True, "the loop turns")
