"""The allow-listed environment a worker CLI gets (docs/ARCHITECTURE.md §6).

Workers never inherit the runner's environment: board DSNs, router tokens and
anything else the daemon holds stay out. Only what a CLI needs to run and
authenticate passes: the basics, the locale, its own config directory and
credential variables, and the simulators' knobs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_BASICS = frozenset({"PATH", "HOME", "LANG", "TZ", "TERM"})
_PREFIXES = {
    "codex": ("CODEX_", "OPENAI_API_KEY"),
    "claude": ("CLAUDE_", "ANTHROPIC_", "IS_SANDBOX"),
}
_ALWAYS_PREFIXES = ("LC_", "LANE_RUNNER_SIM_")


def allowed(provider: str, name: str) -> bool:
    """Whether variable ``name`` may reach a ``provider`` worker."""
    if provider not in _PREFIXES:
        raise ValueError(f"unknown provider {provider!r}")
    return name in _BASICS or name.startswith(_ALWAYS_PREFIXES + _PREFIXES[provider])


def worker_environment(
    provider: str,
    home_dir: Path | None = None,
    extra: Mapping[str, str] | None = None,
    *,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The worker environment: allow-listed variables of ``source`` (the runner's
    own environment by default), ``HOME`` replaced by ``home_dir`` when given
    (the worker user's home), then ``extra`` as the caller's explicit choice."""
    inherited = os.environ if source is None else source
    env = {name: value for name, value in inherited.items() if allowed(provider, name)}
    env.setdefault("PATH", os.defpath)
    if home_dir is not None:
        env["HOME"] = str(home_dir)
    env.update(extra or {})
    return env
