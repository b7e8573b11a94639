"""What a stopping daemon says it waits for, and how to stop it now (``daemon.py``).

The first stop signal gives running work ``shutdown_grace`` seconds; a second one
stops now: the process trees are killed and the runs stay claimed, so the next
start resumes them. Both are said in the log as they happen, and in ``status.json``
for ``lane-runner status``, because an operator at a terminal otherwise waits
without a word.
"""

from __future__ import annotations

import signal
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Stopping:
    """A shutdown in progress: what asked for it and until when runs may finish."""

    signal: str | None
    """The signal's name (``SIGINT``); None when the daemon stops on its own (``--until-idle``)."""
    since: float
    grace_ends_at: float
    now: bool = False
    """A second signal: the runs are being cut short."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def signal_name(signum: int | None) -> str | None:
    return None if signum is None else signal.Signals(signum).name


def again(name: str | None) -> str:
    """How to ask again: Ctrl-C at a terminal, the same signal otherwise."""
    return "Ctrl-C" if name in (None, "SIGINT") else name or "the signal"


def waiting_words(name: str | None, runs: int, grace: float) -> str:
    """The first signal's message: what the daemon waits for and how to stop it now."""
    why = f"{name}: " if name else ""
    if runs == 0:
        return f"{why}stopping (no runs in flight)"
    plural, they = ("run", "it stays claimed and resumes") if runs == 1 else (
        "runs", "they stay claimed and resume")
    return (
        f"{why}stop claiming; waiting up to {grace:g} s for {runs} {plural} to finish. "
        f"{again(name)} again stops now ({they} at the next start)"
    )


def now_words(name: str | None, runs: int) -> str:
    """The second signal's message."""
    plural, they = ("run", "it stays claimed and resumes") if runs == 1 else (
        "runs", "they stay claimed and resume")
    return (
        f"{again(name)} again: stopping now, ending the process trees of {runs} {plural}; "
        f"{they} at the next start"
    )


def status_words(stopping: dict[str, Any], runs: int, now: float) -> str:
    """``lane-runner status`` for a daemon that is stopping."""
    if stopping.get("now"):
        return f"stopping now: ending {runs} run(s); they resume at the next start"
    left = max(0.0, float(stopping["grace_ends_at"]) - now)
    if runs == 0:
        return "stopping"
    return (
        f"stopping ({stopping.get('signal') or 'idle'}): waiting for {runs} run(s), "
        f"{left:.0f} s of grace left; {again(stopping.get('signal'))} again stops now"
    )
