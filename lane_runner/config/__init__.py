"""Configuration: defaults, then ``config.toml`` in the home, then ``LANE_RUNNER_<KEY>``.

Every key is declared once in ``KEYS`` (``keys``) with its parser (``checks``), default
and meaning, so ``config show`` can print the effective value and where it came from,
and an unknown key or a bad value is an error that names the key. ``loading`` reads the
file and the environment into a ``Config`` (``effective``); ``clis`` says what it means
for each CLI; ``generated`` writes ``settings.py``, the typed fields, from the table.

Importers use the names below (``from lane_runner.config import Config``); the modules
are the package's own layout.
"""

from lane_runner.config.checks import HOOK_NAMES, HOOK_TIMEOUT, PRICE_KINDS, listen_address
from lane_runner.config.clis import (
    cli_binary,
    cli_cap,
    cli_environment,
    cli_models,
    cli_overrides,
    cli_sandbox,
    egress_destinations,
    isolation,
    sandboxed,
)
from lane_runner.config.effective import Config
from lane_runner.config.generated import SETTINGS_FILE, settings_source, write_settings
from lane_runner.config.keys import KEYS, KEYS_BY_NAME, RESTART_KEYS, Key
from lane_runner.config.loading import (
    CONFIG_VARIABLE,
    ENV_PREFIX,
    MAX_CONFIG_BYTES,
    NOT_SETTINGS,
    config_file,
    default_home,
    default_home_source,
    load,
)

__all__ = [
    "CONFIG_VARIABLE",
    "ENV_PREFIX",
    "HOOK_NAMES",
    "listen_address",
    "HOOK_TIMEOUT",
    "KEYS",
    "KEYS_BY_NAME",
    "MAX_CONFIG_BYTES",
    "NOT_SETTINGS",
    "PRICE_KINDS",
    "RESTART_KEYS",
    "SETTINGS_FILE",
    "Config",
    "Key",
    "cli_binary",
    "cli_cap",
    "cli_environment",
    "cli_models",
    "cli_overrides",
    "cli_sandbox",
    "config_file",
    "default_home",
    "default_home_source",
    "egress_destinations",
    "isolation",
    "load",
    "sandboxed",
    "settings_source",
    "write_settings",
]
