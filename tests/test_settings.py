"""The typed configuration (issue 29): ``settings.py`` holds one typed field per key of
``config.KEYS``, generated from it, so a misspelt key is a type error for mypy and an
unknown name given to ``Config.replace`` is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mypy import api as mypy_api

from lane_runner import config
from lane_runner.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_the_settings_are_generated_from_the_keys() -> None:
    assert config.SETTINGS_FILE.read_text(encoding="utf-8") == config.settings_source(), (
        "settings.py is stale: python -c 'from lane_runner import config; "
        "config.write_settings()'"
    )
    assert [field.name for field in dataclasses.fields(Settings)] == [k.name for k in config.KEYS]


def test_every_key_is_a_field_of_the_loaded_configuration(tmp_path: Path) -> None:
    cfg = config.load(tmp_path, {})
    assert all(getattr(cfg, key.name) == cfg.values[key.name] for key in config.KEYS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.concurrency = 2  # type: ignore[misc]


def test_replace_refuses_a_name_that_is_no_key(tmp_path: Path) -> None:
    cfg = config.load(tmp_path, {})
    assert cfg.replace(concurrency=2).concurrency == 2
    with pytest.raises(TypeError, match="concurency"):
        cfg.replace(concurency=2)  # type: ignore[call-arg]


def test_a_misspelt_key_is_a_type_error(tmp_path: Path) -> None:
    use = tmp_path / "use.py"
    use.write_text(
        "from lane_runner.config import Config\n\n\n"
        "def slots(cfg: Config) -> int:\n"
        "    return cfg.concurency\n\n\n"
        "def more(cfg: Config) -> Config:\n"
        "    return cfg.replace(concurency=2)\n\n\n"
        "def right(cfg: Config) -> int:\n"
        "    return cfg.replace(concurrency=2).concurrency\n"
    )
    said, _, status = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(use)]
    )
    assert status == 1, said
    errors = [line.split(": error: ")[1] for line in said.splitlines() if ": error: " in line]
    assert any('"Config" has no attribute "concurency"' in error for error in errors), said
    assert any('argument "concurency" for "replace"' in error for error in errors), said
    assert not any(":12:" in line for line in said.splitlines()), said  # the right spelling
