"""The effective configuration: every key's value (``Settings``), the home it is for and
where each value came from, with the copies a test (``replace``) or a reload
(``reloaded_as``) makes of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

from lane_runner import redact
from lane_runner.config.keys import KEYS, KEYS_BY_NAME, RESTART_KEYS, Key
from lane_runner.errors import UsageError
from lane_runner.settings import Changes, Settings


@dataclass(frozen=True, kw_only=True)
class Config(Settings):
    """Effective configuration: every key a typed field (``Settings``, generated from
    ``KEYS``), the home it is for, and where each value came from (``sources``)."""

    home: Path
    sources: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def of(home: Path, values: Mapping[str, Any], sources: Mapping[str, str]) -> Config:
        """The configuration of ``values`` (one per key, parsed); TypeError names a value
        missing or a name that is no key."""
        return Config(home=home, sources=dict(sources), **values)

    @property
    def values(self) -> dict[str, Any]:
        """Every key's value by name, in ``KEYS`` order (``config show``, a reload)."""
        return {key.name: getattr(self, key.name) for key in KEYS}

    def replace(self, **changes: Unpack[Changes]) -> Config:
        """A copy with some values changed, each parsed as from the file (tests and the
        demo use this). A name that is no key is a type error, and a TypeError here."""
        values = self.values
        sources = dict(self.sources)
        for name, raw in changes.items():
            key = KEYS_BY_NAME.get(name)
            if key is None:
                raise TypeError(f"{name!r} is no configuration key; see 'lane-runner config show'")
            values[name] = parse(key, raw, "override")
            sources[name] = "override"
        return Config.of(self.home, values, sources)

    def reloaded_as(self, loaded: Config) -> tuple[Config, list[str]]:
        """``loaded`` with the restart keys kept at their running values, and the names of
        those whose new values must wait for a restart."""
        running, wanted = self.values, loaded.values
        waiting = [name for name in RESTART_KEYS if wanted[name] != running[name]]
        values = {**wanted, **{name: running[name] for name in RESTART_KEYS}}
        sources = {**loaded.sources, **{name: self.sources[name] for name in RESTART_KEYS}}
        return Config.of(loaded.home, values, sources), waiting



def parse(key: Key, raw: Any, where: str) -> Any:
    """``raw`` as ``key`` reads it; a bad value is a UsageError naming the key and
    ``where`` it was written."""
    try:
        return key.parse(raw)
    except (ValueError, TypeError) as error:
        if key.shown is not None:  # the value may hold a secret redaction cannot find
            raise UsageError(f"bad value for {key.name} in {where}: {error}") from None
        shown = redact.text(f"{raw!r} ({error})")  # a bad board_url may hold a password
        raise UsageError(f"bad value for {key.name} in {where}: {shown}") from None
