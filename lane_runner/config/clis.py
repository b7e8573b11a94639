"""What the configuration says of each CLI and of the sandbox around it: the values of
the per-provider keys (``<provider>_config``, ``_env``, ``_models``, ``_bin``,
``max_running_<provider>``) by provider name, the isolation that applies and what a
sandboxed attempt may reach."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lane_runner.providers import ADAPTERS, sandbox
from lane_runner.providers.egress import Destination

if TYPE_CHECKING:
    from lane_runner.config.effective import Config


def cli_overrides(cfg: Config, provider: str) -> dict[str, Any]:
    """``<provider>_config``: the operator's settings of that CLI's own configuration
    (codex's ``-c``); empty for a CLI configured only through its environment."""
    return dict(getattr(cfg, f"{provider}_config", None) or {})


def cli_sandbox(cfg: Config, provider: str) -> str | None:
    """``<provider>_sandbox``: that CLI's own sandbox mode; None for a CLI without one."""
    value: str | None = getattr(cfg, f"{provider}_sandbox", None)
    return value


def isolation(cfg: Config) -> tuple[str, str]:
    """The isolation that applies to real CLIs' attempts under ``cfg``, and why; a pool
    (``worker_users``) without ``worker_user`` is judged by its first user, as its runs
    each work as one of them."""
    user = cfg.worker_user or next(iter(cfg.worker_users), None)
    return sandbox.choose(cfg.isolation, user, sandbox.unavailable(user))


def sandboxed(cfg: Config) -> bool:
    """Whether a real CLI's attempts, and the hooks around them, run in a sandbox of
    their own (``isolation``); the bundled simulators are the runner's own code, and
    run as they are."""
    return not cfg.simulate and isolation(cfg)[0] == sandbox.SANDBOX


def egress_destinations(cfg: Config, environ: Mapping[str, str] = os.environ) -> tuple[
    Destination, ...
]:
    """What a sandboxed attempt may reach: each CLI's model API (its adapter's
    ``egress_hosts``), the gateway each is configured with, and ``egress_allow``."""
    found: list[Destination] = []
    for cli in ADAPTERS.values():
        found += [Destination(host) for host in cli.egress_hosts]
        env = {**environ, **cli_environment(cfg, cli.name)}
        url, _ = cli.gateway(cli_overrides(cfg, cli.name), env)
        gateway = Destination.of_url(url) if url else None
        if gateway is not None:
            found.append(gateway)
    found += [Destination.parse(entry) for entry in cfg.egress_allow]
    return tuple(dict.fromkeys(found))


def cli_environment(cfg: Config, provider: str) -> dict[str, str]:
    """``<provider>_env``: variables the operator sets for that CLI's workers."""
    return dict(getattr(cfg, f"{provider}_env"))


def cli_models(cfg: Config, provider: str) -> dict[str, str]:
    """``<provider>_models``: the static policy's model per effort for that CLI."""
    return dict(getattr(cfg, f"{provider}_models"))


def cli_binary(cfg: Config, provider: str) -> str | None:
    """``<provider>_bin``: the CLI the operator names; None: found on PATH."""
    value: str | None = getattr(cfg, f"{provider}_bin")
    return value


def cli_cap(cfg: Config, provider: str) -> int:
    """``max_running_<provider>``: runs that CLI may hold at once; 0: no cap."""
    return int(getattr(cfg, f"max_running_{provider}"))
