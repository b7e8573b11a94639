"""``lane-runner config show``: the effective configuration and where each value came from."""

from __future__ import annotations

import argparse
import os
from typing import Any

from lane_runner import redact
from lane_runner.cli.arguments import add_json_flag, load_config
from lane_runner.cli.output import print_json, print_table
from lane_runner.config import KEYS, Config, Key, cli_environment
from lane_runner.names import PROVIDERS
from lane_runner.providers.environment import allowed


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("config", help="show the effective configuration")
    commands = group.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = commands.add_parser("show", help="every key, its value and where it came from")
    add_json_flag(show)
    show.set_defaults(handler=show_config)


def _plain(value: Any) -> Any:
    """A value as shown: tuples as lists, URLs without their credentials, credentials set
    by name (``claude_env``'s ``ANTHROPIC_API_KEY``) hidden (``redact``)."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {
            name: redact.setting(name, item) if isinstance(item, str) else item
            for name, item in value.items()
        }
    if isinstance(value, str):
        return redact.text(value)
    return value


def _shown(key: Key, value: Any) -> Any:
    return value if key.shown is None else key.shown(value)


def worker_passes(cfg: Config) -> dict[str, list[str]]:
    """Which variables a worker of each provider would get (names only: values may be
    secrets): those of this environment ``worker_env`` lets through, and those
    ``<provider>_env`` sets."""
    return {
        provider: sorted(
            {name for name in os.environ if allowed(provider, name, cfg.worker_env)}
            | set(cli_environment(cfg, provider))
        )
        for provider in PROVIDERS
    }


def show_config(args: argparse.Namespace) -> int:
    # What a home would get, before it exists too (a mounted LANE_RUNNER_CONFIG); it
    # reads and makes nothing.
    cfg = load_config(args, needs_home=False)
    if args.json:
        print_json(
            {
                "home": str(cfg.home),
                "keys": {
                    key.name: {
                        "value": _plain(_shown(key, cfg.values[key.name])),
                        "source": cfg.sources[key.name],
                    }
                    for key in KEYS
                },
                "worker_environment": worker_passes(cfg),
            }
        )
        return 0
    print(f"home: {cfg.home}")
    rows = []
    for key in KEYS:
        value = _plain(_shown(key, cfg.values[key.name]))
        if isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ",".join(value)
        rows.append((key.name, value, cfg.sources[key.name]))
    print_table(("key", "value", "source"), rows)
    print("\nworker environment (names that reach the CLIs from this environment):")
    for provider, names in worker_passes(cfg).items():
        print(f"  {provider}: {' '.join(names) or '(none)'}")
    return 0
