"""Whether a run could start any agent CLI at all, decided before the daemon claims.

Without one, every claimed task would be blocked ``capability`` in a fraction of a
second and the batch would end as if all went well: a first run on a machine with
neither CLI installed must instead stop at once, saying what to install or set.
Any provider counts: the static policy falls back to a provider left out of
``provider_preference``, and a router may name either.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lane_runner.errors import UsageError
from lane_runner.providers import ADAPTERS


class NoUsableCli(UsageError):
    """No provider's CLI was found and the simulators are off (exit 2)."""


def problem(binaries: Mapping[str, Path | None] | None) -> str | None:
    """Why no run could start (``binaries`` as ``services.preflight`` found them; None
    when simulating), or None when at least one CLI is there."""
    if binaries is None or any(binaries.values()):
        return None
    commands = " or ".join(cli.command for cli in ADAPTERS.values())
    keys = " / ".join(f"{provider}_bin" for provider in ADAPTERS)
    return (
        f"no agent CLI found: install {commands} on PATH, or name one with {keys} in "
        "config.toml; to try the runner without one, set simulate = true (the bundled "
        "simulated CLIs)"
    )


def require(binaries: Mapping[str, Path | None] | None) -> None:
    """``NoUsableCli`` when ``problem`` finds one."""
    found = problem(binaries)
    if found is not None:
        raise NoUsableCli(found)
