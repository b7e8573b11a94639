"""Loading the configuration: defaults, then the file (``config.toml`` in the home, or
the one ``LANE_RUNNER_CONFIG`` names), then ``LANE_RUNNER_<KEY>``; an unknown key or a
bad value is an error that names it.

The file is the operator's input, not the runner's state: it may be a link (as
Kubernetes mounts a ConfigMap), or live outside the home where ``LANE_RUNNER_CONFIG``
names it, and is then read through ``files.read_operator_file``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lane_runner import files, suggest
from lane_runner.config.effective import Config, parse
from lane_runner.config.keys import KEYS, KEYS_BY_NAME
from lane_runner.errors import UsageError
from lane_runner.home import Home

ENV_PREFIX = "LANE_RUNNER_"
#: Names the configuration file when it is not ``config.toml`` in the home.
CONFIG_VARIABLE = "LANE_RUNNER_CONFIG"
# LANE_RUNNER_* variables that are not settings: the home, the configuration file,
# the simulators' knobs (passed through to simulated CLIs) and the markers the
# runner gives its workers.
NOT_SETTINGS = (
    "LANE_RUNNER_HOME",
    CONFIG_VARIABLE,
    "LANE_RUNNER_SIM_",
    "LANE_RUNNER_NODE",
    "LANE_RUNNER_ATTEMPT",
)
#: Whole names of LANE_RUNNER_* variables that are not settings: the web console's token
#: (a secret, never a setting ``config show`` would print; docs/console.md).
NOT_SETTING_NAMES = ("LANE_RUNNER_WEB_TOKEN",)


def default_home(environ: Mapping[str, str] = os.environ) -> Path:
    """``LANE_RUNNER_HOME``, else systemd's ``STATE_DIRECTORY``, else the XDG data dir."""
    if environ.get("LANE_RUNNER_HOME"):
        return Path(environ["LANE_RUNNER_HOME"])
    if environ.get("STATE_DIRECTORY"):
        return Path(environ["STATE_DIRECTORY"].split(":")[0])
    xdg = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "lane-runner"


def default_home_source(environ: Mapping[str, str] = os.environ) -> str:
    """Where ``default_home`` found the home, in the words of an error that names it."""
    if environ.get("LANE_RUNNER_HOME"):
        return "LANE_RUNNER_HOME"
    if environ.get("STATE_DIRECTORY"):
        return "STATE_DIRECTORY (systemd)"
    if environ.get("XDG_DATA_HOME"):
        return "the default, $XDG_DATA_HOME/lane-runner"
    return "the default, ~/.local/share/lane-runner"


MAX_CONFIG_BYTES = 1 << 20


def config_file(home: Path, environ: Mapping[str, str]) -> tuple[Path, bool]:
    """The configuration file, and whether a setting named it: the file
    ``LANE_RUNNER_CONFIG`` names (a mounted ConfigMap, say), else the home's ``config.toml``."""
    named = environ.get(CONFIG_VARIABLE)
    if named:
        return Path(named).expanduser().absolute(), True
    return Home(home).config_file, False


def _read_file(path: Path, named: bool) -> dict[str, Any]:
    """The settings in ``path``; {} when the home's own file is absent.

    A named file, or a link at the home's name, is the operator's and read through its
    links when only root or the runner's user can write what it reaches (anything else
    is refused, naming why); any other entry at the home's name is read without
    following anything, and a FIFO or device there moved aside.
    """
    try:
        if named or path.is_symlink():
            data = files.read_operator_file(path, MAX_CONFIG_BYTES)
        else:
            data = files.read(path, MAX_CONFIG_BYTES)
        if len(data) > MAX_CONFIG_BYTES:
            raise UsageError(f"{path} is over {MAX_CONFIG_BYTES} bytes; is it the right file?")
        return tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text; fix or remove it") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path} is not valid TOML: {error}; fix or remove it") from None
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None


def load(home: Path | None = None, environ: Mapping[str, str] = os.environ) -> Config:
    """The effective configuration for ``home`` (default: ``default_home``)."""
    home = (home or default_home(environ)).expanduser().absolute()
    values = {key.name: key.default for key in KEYS}
    sources = dict.fromkeys(values, "default")
    path, named = config_file(home, environ)
    for name, raw in _read_file(path, named).items():
        if name not in KEYS_BY_NAME:
            raise UsageError(
                f"unknown key {name!r}{suggest.hint(name, KEYS_BY_NAME)} in {path}; "
                "see 'lane-runner config show'"
            )
        values[name] = parse(KEYS_BY_NAME[name], raw, str(path))
        sources[name] = str(path)
    for variable, raw in environ.items():
        if (not variable.startswith(ENV_PREFIX) or variable.startswith(NOT_SETTINGS)
                or variable in NOT_SETTING_NAMES):
            continue
        name = variable[len(ENV_PREFIX) :].lower()
        if name not in KEYS_BY_NAME:
            settings = (ENV_PREFIX + key.upper() for key in KEYS_BY_NAME)
            raise UsageError(
                f"unknown setting {variable}{suggest.hint(variable, settings)}; "
                "see 'lane-runner config show'"
            )
        values[name] = parse(KEYS_BY_NAME[name], raw, variable)
        sources[name] = variable
    return Config.of(home, values, sources)
