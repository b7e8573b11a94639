"""``settings.py``, generated from the key table: one typed field per key, so every
reader of a setting is type-checked against the parser that produced it."""

from __future__ import annotations

from pathlib import Path

from lane_runner.config.keys import KEYS, Key

SETTINGS_FILE = Path(__file__).resolve().parents[1] / "settings.py"


def settings_source() -> str:
    """The text of ``settings.py``: one typed field per key of ``KEYS``, typed as its
    parser returns, and the keyword arguments ``Config.replace`` takes."""
    fields = "".join(f"    {key.name}: {_type_of(key)}\n" for key in KEYS)
    changes = "".join(f"    {key.name}: Any\n" for key in KEYS)
    return (
        '"""The configuration\'s typed fields, one per key of ``config.KEYS``. Generated: do\n'
        "not edit. After changing a key or adding a provider adapter, regenerate it with\n"
        "``python -c 'from lane_runner import config; config.write_settings()'``;\n"
        '``tests/test_settings.py`` fails while it is stale.\n"""\n\n'
        "from __future__ import annotations\n\n"
        "from dataclasses import dataclass\n"
        "from typing import Any, TypedDict\n\n\n"
        "@dataclass(frozen=True, kw_only=True)\n"
        "class Settings:\n"
        '    """Every key\'s effective value; ``config.KEYS`` says what each means."""\n\n'
        f"{fields}\n\n"
        "class Changes(TypedDict, total=False):\n"
        '    """``Config.replace``\'s keyword arguments: a key\'s new value, parsed as from the\n'
        '    file."""\n\n'
        f"{changes}"
    )


def _type_of(key: Key) -> str:
    """The type ``key``'s parser returns, as written in its annotation."""
    annotation = key.parse.__annotations__["return"]
    return annotation if isinstance(annotation, str) else annotation.__name__


def write_settings() -> None:
    """Regenerate ``settings.py`` from ``KEYS``."""
    SETTINGS_FILE.write_text(settings_source(), encoding="utf-8")
