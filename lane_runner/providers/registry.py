"""The provider adapters, keyed by name, in the runner's default order of preference.

Everything outside ``providers`` that needs to know a CLI asks here: which CLIs
there are (``NAMES``), and the adapter of one (``adapter``). Adding a CLI is adding
its adapter module to ``ADAPTERS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from lane_runner.providers import claude, codex, gemini, opencode
from lane_runner.providers.adapter import Provider

ADAPTERS: Mapping[str, Provider] = MappingProxyType(
    {
        adapter.name: adapter
        for adapter in (codex.ADAPTER, claude.ADAPTER, opencode.ADAPTER, gemini.ADAPTER)
    }
)
#: The providers' names, the default ``provider_preference`` first.
NAMES: tuple[str, ...] = tuple(ADAPTERS)


def adapter(name: str) -> Provider:
    """The adapter of provider ``name``; ValueError for a name no adapter has."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}: expected one of {', '.join(NAMES)}") from None
