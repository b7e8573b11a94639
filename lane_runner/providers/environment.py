"""The allow-listed environment a worker CLI gets (docs/ARCHITECTURE.md §6).

Workers never inherit the runner's environment: board DSNs, router tokens and
anything else the daemon holds stay out. Only what a CLI needs to run and
authenticate passes: the basics, the locale, its own config directory and
credential variables, and the simulators' knobs -- plus what the operator adds
(``worker_env``: names, or prefixes ending in ``*``, for proxies, CA bundles or an
SSH agent socket). A prefix never lets the runner's own secrets through (its
``LANE_RUNNER_`` settings, database URLs and passwords): only an exact name can.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from lane_runner.providers.registry import adapter

_BASICS = frozenset({"PATH", "HOME", "LANG", "TZ", "TERM"})
_ALWAYS_PREFIXES = ("LC_", "LANE_RUNNER_SIM_")


_RUNNER_SECRETS = frozenset({"DATABASE_URL", "PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE"})


def runner_secret(name: str) -> bool:
    """A variable the runner itself may hold a secret in; no prefix pattern passes it."""
    if name.startswith("LANE_RUNNER_"):
        return not name.startswith("LANE_RUNNER_SIM_")
    return name in _RUNNER_SECRETS or name.endswith("_DATABASE_URL")


def configured(name: str, patterns: Sequence[str]) -> bool:
    """Whether ``worker_env`` lets ``name`` through: an exact name, or a ``PREFIX*`` that
    does not reach into the runner's secrets."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]) and not runner_secret(name):
                return True
        elif name == pattern:
            return True
    return False


def allowed(provider: str, name: str, extra: Sequence[str] = ()) -> bool:
    """Whether variable ``name`` may reach a ``provider`` worker (``extra``: ``worker_env``)."""
    own = adapter(provider).env_prefixes  # ValueError for an unknown provider
    if name in _BASICS or name.startswith(_ALWAYS_PREFIXES + own):
        return True
    return configured(name, extra)


def worker_environment(
    provider: str,
    home_dir: Path | None = None,
    extra: Mapping[str, str] | None = None,
    *,
    source: Mapping[str, str] | None = None,
    passes: Sequence[str] = (),
) -> dict[str, str]:
    """The worker environment: allow-listed variables of ``source`` (the runner's
    own environment by default), ``HOME`` replaced by ``home_dir`` when given
    (the worker user's home), then ``extra`` as the caller's explicit choice.
    ``passes`` is the operator's ``worker_env``."""
    inherited = os.environ if source is None else source
    env = {name: value for name, value in inherited.items() if allowed(provider, name, passes)}
    env.setdefault("PATH", os.defpath)
    if home_dir is not None:
        env["HOME"] = str(home_dir)
    env.update(extra or {})
    return env


def passed(passes: Sequence[str], source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``source`` (the runner's environment) ``worker_env`` lets through."""
    inherited = os.environ if source is None else source
    return {name: value for name, value in inherited.items() if configured(name, passes)}


def plain_environment(
    home_dir: Path | None = None,
    extra: Mapping[str, str] | None = None,
    *,
    source: Mapping[str, str] | None = None,
    passes: Sequence[str] = (),
) -> dict[str, str]:
    """What a command that is not a CLI gets (an operator's hook): the basics, the locale
    and ``worker_env``'s variables (an SSH agent, a proxy, a token), none of either
    provider's, ``HOME`` replaced by ``home_dir``, then ``extra``."""
    inherited = os.environ if source is None else source
    env = {
        name: value
        for name, value in inherited.items()
        if name in _BASICS or name.startswith("LC_")
    }
    env.update(passed(passes, inherited))
    env.setdefault("PATH", os.defpath)
    if home_dir is not None:
        env["HOME"] = str(home_dir)
    env.update(extra or {})
    return env
