"""Configuration: defaults, then ``config.toml`` in the home, then ``LANE_RUNNER_<KEY>``.

Every key is declared once in ``KEYS`` with its parser, default and meaning, so
``config show`` can print the effective value and where it came from, and an
unknown key or a bad value is an error that names the key.

The file is the operator's input, not the runner's state: it may be a link (as
Kubernetes mounts a ConfigMap), or live outside the home where ``LANE_RUNNER_CONFIG``
names it, and is then read through ``files.read_operator_file``.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter
from typing import Any, Unpack
from urllib.parse import urlsplit

import httpx

from lane_runner import files, redact, suggest
from lane_runner.errors import UsageError
from lane_runner.home import Home
from lane_runner.names import (
    EFFORTS,
    MODEL_RULE,
    PROVIDERS,
    is_lane_assignee,
    is_model_name,
    is_valid_name,
)
from lane_runner.providers import ADAPTERS, Provider, sandbox
from lane_runner.providers.egress import Destination
from lane_runner.settings import Changes, Settings

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


# -- value parsers: each takes a TOML value or an environment string ---------------


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _optional_text(value: Any) -> str | None:
    text = _text(value).strip()
    return text or None


def _router_url(value: Any) -> str | None:
    """An ``http://`` or ``https://`` URL with a host, or empty for the static policy.

    Anything else (no scheme, a typo in it, spaces, a bad port) would fail every
    routing request of every task, so it is refused here, naming the key.
    """
    text = _optional_text(value)
    if text is None:
        return None
    if any(character.isspace() or not character.isprintable() for character in text):
        raise ValueError("expected a URL without spaces or control characters")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - parsing the port is the check
        httpx.URL(text)
    except (ValueError, httpx.InvalidURL) as error:
        raise ValueError(f"not a usable URL ({error})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("expected http://<host>[:<port>]/<path> or https://...")
    return text


def _route_id(*fields: str) -> Callable[[Any], str]:
    """A router route id: printable, no spaces, with exactly the placeholders ``fields``."""

    def parse(value: Any) -> str:
        text = _text(value).strip()
        if not text or any(c.isspace() or not c.isprintable() for c in text):
            raise ValueError("expected a route id without spaces or control characters")
        try:
            found = {name for _, name, _, _ in Formatter().parse(text) if name is not None}
        except ValueError as error:
            raise ValueError(f"unbalanced braces ({error})") from None
        if found != set(fields):
            wanted = " and ".join(f"{{{name}}}" for name in fields) or "no {placeholders}"
            raise ValueError(f"expected {wanted} in the route id")
        return text

    return parse


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = _text(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


def _plain(number: float) -> str:
    """``2592000``, ``0.05``: a bound as people write it (``:g`` says ``2.592e+06``)."""
    return str(int(number)) if float(number).is_integer() else str(number)


def _number(minimum: float, maximum: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        wanted = f"expected a number from {_plain(minimum)} to {_plain(maximum)}"
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (ValueError, TypeError):
            raise ValueError(wanted) from None  # never Python's "could not convert"
        if not minimum <= number <= maximum:
            raise ValueError(wanted)
        return number

    return parse


def _integer(minimum: int, maximum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        wanted = f"expected a whole number from {minimum} to {maximum}"
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(wanted)
        try:
            number = int(value)
        except (ValueError, TypeError):
            raise ValueError(wanted) from None  # never Python's "invalid literal for int()"
        if not minimum <= number <= maximum:
            raise ValueError(wanted)
        return number

    return parse


def _assignee(value: Any) -> str:
    text = _text(value).strip()
    if text and not is_lane_assignee(text):
        raise ValueError(f"expected cli-auto, cli-<{'|'.join(PROVIDERS)}>-<effort>, or empty")
    return text


def _names(value: Any) -> tuple[str, ...]:
    """A list of board slugs: a TOML array, or ``a,b`` from the environment."""
    items = value if isinstance(value, list) else _text(value).split(",")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    if len(set(names)) != len(names):
        raise ValueError("expected distinct board names")
    return names


def _effort(value: Any) -> str:
    text = _text(value).strip()
    if text not in EFFORTS:
        raise ValueError(f"expected one of {', '.join(EFFORTS)}")
    return text


def _providers(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else _text(value).split(",")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    if not names or any(name not in PROVIDERS for name in names) or len(set(names)) != len(names):
        raise ValueError(f"expected a list of distinct providers from {', '.join(PROVIDERS)}")
    return names


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


def _worker_env(value: Any) -> tuple[str, ...]:
    """Variable names, or prefixes ending in ``*``, a worker may inherit besides its own.

    The runner's settings (``LANE_RUNNER_*``) are refused outright: they hold the board
    and router credentials, and the simulators' knobs pass anyway.
    """
    items = value if isinstance(value, list) else _text(value).split(",")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    for name in names:
        if not _VARIABLE.fullmatch(name) or name == "*":
            raise ValueError(
                f"{name!r} is not a variable name or a prefix ending in '*' "
                "(e.g. HTTPS_PROXY, SSL_CERT_FILE, SSH_AUTH_SOCK, NO_PROXY*)"
            )
        if name.upper().startswith("LANE_RUNNER_"):
            raise ValueError(f"{name!r}: the runner's own settings never reach workers")
    return names


def _isolation(value: Any) -> str | None:
    """``none``, ``user`` or ``sandbox``; empty: the best this host allows."""
    text = _optional_text(value)
    if text is not None and text not in sandbox.ISOLATIONS:
        raise ValueError(f"expected one of {', '.join(sandbox.ISOLATIONS)}, or empty")
    return text


def _egress_allow(value: Any) -> tuple[str, ...]:
    """Hosts (``host`` or ``host:port``) a sandboxed attempt may reach."""
    items = value if isinstance(value, list) else _text(value).split(",")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    for name in names:
        Destination.parse(name)  # ValueError names the entry
    return names


def _table(value: Any) -> dict[str, Any]:
    """A TOML table from ``config.toml``, or the same written as TOML in the environment
    (``LANE_RUNNER_CLAUDE_ENV='ANTHROPIC_BASE_URL = "https://gw.example/"'``)."""
    if isinstance(value, dict):
        return value
    try:
        return tomllib.loads(_text(value))
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"expected TOML key = value lines ({error})") from None


def _cli_config(cli: Provider) -> Callable[[Any], dict[str, Any]]:
    """``<provider>_config``: the CLI's own settings, as its adapter checks them (codex:
    model provider, gateway; flat dotted keys, one ``-c`` each)."""

    def parse(value: Any) -> dict[str, Any]:
        return cli.config_settings(_table(value))

    return parse


def _cli_env(value: Any) -> dict[str, str]:
    """Variables set in one CLI's environment: names to strings, never the runner's own."""
    env: dict[str, str] = {}
    for name, raw in _table(value).items():
        if not _VARIABLE.fullmatch(name) or name.endswith("*"):
            raise ValueError(f"{name!r} is not a variable name")
        if name.upper().startswith("LANE_RUNNER_"):
            raise ValueError(f"{name!r}: the runner's own settings never reach workers")
        if not isinstance(raw, str):
            raise ValueError(f"{name}: expected a string (write \"1\", not 1 or true)")
        env[name] = raw
    return env


def cli_overrides(cfg: Config, provider: str) -> dict[str, Any]:
    """``<provider>_config``: the operator's settings of that CLI's own configuration
    (codex's ``-c``); empty for a CLI configured only through its environment."""
    return dict(getattr(cfg, f"{provider}_config", None) or {})


def cli_sandbox(cfg: Config, provider: str) -> str | None:
    """``<provider>_sandbox``: that CLI's own sandbox mode; None for a CLI without one."""
    value: str | None = getattr(cfg, f"{provider}_sandbox", None)
    return value


def isolation(cfg: Config) -> tuple[str, str]:
    """The isolation that applies to real CLIs' attempts under ``cfg``, and why."""
    return sandbox.choose(cfg.isolation, cfg.worker_user, sandbox.unavailable(cfg.worker_user))


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


def _ip_address(value: Any) -> str:
    """An IP address literal: the metrics listener binds it, so a name would be a guess."""
    text = _text(value).strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(
            "expected an IP address: 127.0.0.1 (this host only), 0.0.0.0 (every IPv4 "
            "address, as a pod needs) or :: (every address)"
        ) from None


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _text(value).strip()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def _models(value: Any) -> dict[str, str]:
    """Models per effort: a TOML table, or ``low=m1,high=m2`` from the environment."""
    pairs: list[tuple[Any, Any]]
    if isinstance(value, dict):
        pairs = list(value.items())
    else:
        items = [item for item in _text(value).split(",") if item.strip()]
        if any("=" not in item for item in items):
            raise ValueError("expected effort=model pairs separated by commas")
        pairs = [(effort, model) for effort, _, model in (i.partition("=") for i in items)]
    models = {str(effort).strip(): _text(model).strip() for effort, model in pairs}
    unknown = sorted(set(models) - set(EFFORTS))
    if unknown or not all(models.values()):
        raise ValueError(f"expected efforts from {', '.join(EFFORTS)} with non-empty models")
    unsafe = [model for model in models.values() if not is_model_name(model)]
    if unsafe:
        raise ValueError(f"model {unsafe[0]!r} is not a model name: expected {MODEL_RULE}")
    return models


_IDENTITY = re.compile(r"\s*([^<>]*?)\s*<([^<>\s]+@[^<>\s]+)>\s*")


def _identity(value: Any) -> str:
    """``Name <email>``, as git names an author; spaces around the parts dropped."""
    match = _IDENTITY.fullmatch(_text(value))
    if match is None or not match.group(1).isprintable() or not match.group(1):
        raise ValueError("expected 'Name <email>', e.g. 'lane-runner <lane-runner@localhost>'")
    return f"{match.group(1)} <{match.group(2)}>"


_REMOTE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
#: The hooks a board may have (see ``run/hooks.py``), and their timeout unless it says.
HOOK_NAMES = ("after_create", "before_run", "after_run", "after_done", "before_remove")
HOOK_TIMEOUT = 300.0


def _remote(value: Any) -> str:
    """A git remote's name (never an option, a URL or a path: those would be pushed to as is)."""
    text = _text(value).strip()
    if not _REMOTE.fullmatch(text) or ".." in text:
        raise ValueError("expected a remote name such as origin (git remote -v lists them)")
    return text


def _hooks(value: Any) -> dict[str, dict[str, Any]]:
    """Per board (``"*"``: every board without its own), hook name -> shell command, and
    an optional ``timeout`` in seconds. From the environment: a TOML inline table."""
    if isinstance(value, str):
        try:
            value = tomllib.loads(f"hooks = {value}")["hooks"] if value.strip() else {}
        except tomllib.TOMLDecodeError as error:
            example = '{main = {after_done = "..."}}'
            raise ValueError(f"expected a TOML table such as {example}: {error}") from None
    if not isinstance(value, dict):
        raise ValueError("expected a table of boards, e.g. [hooks.main] after_done = \"...\"")
    boards: dict[str, dict[str, Any]] = {}
    for board, entry in value.items():
        if board != "*" and not is_valid_name(board):
            raise ValueError(f"{board!r} is not a board name (or '*' for every board)")
        if not isinstance(entry, dict):
            raise ValueError(f"hooks.{board} must be a table of hook = \"command\"")
        boards[board] = {name: _hook_entry(board, name, item) for name, item in entry.items()}
    return boards


def _hook_entry(board: str, name: str, item: Any) -> Any:
    if name == "timeout":
        return _number(1, 86400)(item)
    if name not in HOOK_NAMES:
        raise ValueError(f"hooks.{board}.{name} is not a hook; expected {', '.join(HOOK_NAMES)}")
    if not isinstance(item, str) or not item.strip() or "\x00" in item:
        raise ValueError(f"hooks.{board}.{name} must be a shell command")
    return item


#: What a price table gives per model: dollars per million tokens of each kind.
PRICE_KINDS = ("input", "cached_input", "cache_write", "output")


def _toml_table(value: Any, name: str, example: str) -> Any:
    """A TOML table from the file as it is, or from the environment as inline TOML."""
    if not isinstance(value, str):
        return value
    try:
        return tomllib.loads(f"{name} = {value}")[name] if value.strip() else {}
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"expected a TOML table such as {example}: {error}") from None


def _prices(value: Any) -> dict[str, dict[str, float]]:
    """Per model, dollars per million tokens by kind (``PRICE_KINDS``): what a CLI that
    reports no cost of its own (codex) spent is priced by it; a model or kind missing
    leaves the cost unknown, never guessed."""
    value = _toml_table(value, "prices", '{"gpt-5" = {input = 1.25, output = 10.0}}')
    if not isinstance(value, dict):
        raise ValueError('expected a table of models, e.g. [prices."gpt-5"] input = 1.25')
    table: dict[str, dict[str, float]] = {}
    for model, entry in value.items():
        if not is_model_name(model) or not isinstance(entry, dict):
            raise ValueError(f"prices.{model}: expected a model name and a table of kinds")
        unknown = sorted(set(entry) - set(PRICE_KINDS))
        if unknown:
            raise ValueError(f"prices.{model}: {', '.join(unknown)} is not one of "
                             f"{', '.join(PRICE_KINDS)}")
        table[model] = {kind: _number(0, 1e6)(price) for kind, price in entry.items()}
    return table


def _optional_number(minimum: float, maximum: float) -> Callable[[Any], float | None]:
    number = _number(minimum, maximum)

    def parse(value: Any) -> float | None:
        if value is None or (isinstance(value, str) and not value.strip()) or value == 0:
            return None
        return number(value)

    return parse


def _daily_budgets(value: Any) -> dict[str, float]:
    """Dollars a board may spend per UTC day, per board (``"*"``: every board without
    its own)."""
    value = _toml_table(value, "daily_budget_usd", '{"*" = 50.0, main = 200.0}')
    if not isinstance(value, dict):
        raise ValueError('expected a table of boards, e.g. daily_budget_usd = {"*" = 50.0}')
    budgets: dict[str, float] = {}
    for board, amount in value.items():
        if board != "*" and not is_valid_name(board):
            raise ValueError(f"{board!r} is not a board name (or '*' for every board)")
        budgets[board] = _number(0, 1e9)(amount)
    return budgets


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str


def _cli_setting_keys(cli: Provider) -> tuple[Key, ...]:
    """``<provider>_config`` (for a CLI that takes its settings from the runner),
    ``<provider>_env`` and ``<provider>_sandbox`` (for a CLI with a sandbox of its own
    to choose), as the adapter describes them."""
    keys = [Key(f"{cli.name}_env", _cli_env, {}, cli.env_help)]
    if cli.takes_config:
        keys.insert(0, Key(f"{cli.name}_config", _cli_config(cli), {}, cli.config_help))
    if cli.sandbox_modes:
        modes = cli.sandbox_modes
        keys.append(Key(f"{cli.name}_sandbox", _choice(*modes), modes[0], cli.sandbox_help))
    return tuple(keys)


KEYS: tuple[Key, ...] = (
    Key(
        "board_url",
        _optional_text,
        None,
        "postgresql://... for a shared board, hermes:// for a Hermes home; empty: embedded SQLite",
    ),
    Key(
        "board_connections",
        _integer(1, 64),
        3,
        "with a postgresql:// board_url: connections this runner holds at most, one of them "
        "for LISTEN (1: none, wake-ups by a poll every second)",
    ),
    Key(
        "board_pooler",
        _choice("none", "transaction"),
        "none",
        "'transaction': board_url goes through a pooler in transaction mode (PgBouncer): no "
        "session state, no LISTEN on it",
    ),
    Key(
        "board_listen_url",
        _optional_text,
        None,
        "with board_pooler = 'transaction': the server's own address for LISTEN; empty: poll",
    ),
    Key(
        "hermes_boards",
        _names,
        (),
        "with a hermes:// board_url: the Hermes boards to serve; empty: all non-archived ones",
    ),
    Key(
        "concurrency",
        _integer(0, 64),
        0,
        "worker slots; 0: one per memory_per_run_mb of the memory this runner may use (1 to 16)",
    ),
    Key(
        "memory_per_run_mb",
        _integer(64, 1 << 30),
        2048,
        "memory one run is expected to take (MiB), for concurrency = 0",
    ),
    *(
        Key(f"max_running_{p}", _integer(0, 64), 0, f"runs {p} may hold at once; 0: no cap")
        for p in ADAPTERS
    ),
    Key(
        "provider_full",
        _choice("wait", "fallback"),
        "wait",
        "a task routed to a provider at its cap: wait for its slot, or fall back",
    ),
    Key(
        "min_available_memory_mb",
        _integer(0, 1 << 30),
        256,
        "claim nothing while less memory (MiB; the cgroup's room when lower) is free; 0: off",
    ),
    Key(
        "elevated_memory_mb",
        _integer(0, 1 << 30),
        1024,
        "start at most one new run per pass while less memory than this (MiB) is free; 0: off",
    ),
    Key(
        "min_free_disk_mb",
        _integer(0, 1 << 30),
        512,
        "claim nothing while the home's or a workspace's filesystem has less free (MiB); 0: off",
    ),
    Key("router_url", _router_url, None, "HTTP model router; empty: embedded static policy"),
    Key(
        "router_timeout",
        _number(0.1, 600),
        30.0,
        "seconds one routing or judging call may take, retries included",
    ),
    Key("router_auto_route", _route_id(), "lane/worker/auto", "route id asked for cli-auto"),
    Key(
        "router_manual_route",
        _route_id("provider", "effort"),
        "lane/worker/manual/{provider}/{effort}",
        "route id asked for a manual lane",
    ),
    Key("router_judge_route", _route_id(), "lane/judge", "route id asked for the router judge"),
    *(Key(f"{p}_bin", _optional_text, None, f"{p} CLI; empty: found on PATH") for p in ADAPTERS),
    *(key for cli in ADAPTERS.values() for key in _cli_setting_keys(cli)),
    Key("simulate", _boolean, False, "run the bundled simulated CLIs instead of real ones"),
    Key("worker_user", _optional_text, None, "unprivileged user the CLIs run as when root"),
    Key(
        "isolation",
        _isolation,
        None,
        "what contains each attempt: none, user (worker_user) or sandbox (bwrap: its own "
        "mounts, processes and network); empty: sandbox where this host allows it, else "
        "user with worker_user, else none (docs/security.md)",
    ),
    Key(
        "egress_allow",
        _egress_allow,
        (),
        "hosts (host or host:port) a sandboxed attempt may reach through the egress proxy, "
        "besides the CLIs' model APIs and the configured gateways",
    ),
    Key(
        "default_assignee",
        _assignee,
        "cli-auto",
        "given to unassigned ready tasks (empty: leave them)",
    ),
    Key("default_effort", _effort, "high", "effort for cli-auto under the static policy"),
    Key("provider_preference", _providers, PROVIDERS, "static policy: providers in order"),
    *(
        Key(
            f"{p}_models", _models, dict(cli.default_models), f"static policy: {p} model per effort"
        )
        for p, cli in ADAPTERS.items()
    ),
    Key("judge", _optional_text, None, "goal judge: empty for structural, 'router' for the router"),
    Key(
        "lease_ttl", _number(1, 30 * 86400), 1800.0, "claim lease in seconds, renewed by heartbeats"
    ),
    Key("heartbeat_interval", _number(0.05, 3600), 20.0, "seconds between heartbeats"),
    Key(
        "stall_timeout",
        _number(0.1, 86400),
        900.0,
        "no meaningful provider event this long: stalled",
    ),
    Key(
        "tool_stall_timeout",
        _number(0.1, 7 * 86400),
        3600.0,
        "the stall limit while a tool call (a command, a test suite) is in flight",
    ),
    Key(
        "busy_cpu_percent",
        _number(0, 6400),
        10.0,
        "an attempt whose processes use more CPU than this (% of one CPU) is alive however "
        "quiet; 0: only events count",
    ),
    Key(
        "closing_grace",
        _number(0, 600),
        5.0,
        "seconds a CLI may take to exit after its final answer; then its tree is ended",
    ),
    Key(
        "max_runtime",
        _number(1, 7 * 86400),
        43200.0,
        "seconds per run unless the task says otherwise",
    ),
    Key(
        "stuck_warning_fraction",
        _number(0, 0.99),
        0.5,
        "warn when a run is this far into stall_timeout or max_runtime; 0: off",
    ),
    Key(
        "shutdown_grace",
        _number(0, 3600),
        30.0,
        "SIGTERM or task stop: kill process trees after this",
    ),
    Key(
        "release_on_stop",
        _boolean,
        False,
        "SIGTERM hands running work back to ready (a pod that will not come back); "
        "false keeps it claimed for this runner's next start",
    ),
    Key("failure_limit", _integer(1, 1000), 3, "counted failures before a task is blocked gave_up"),
    Key(
        "failure_backoff_base",
        _number(0, 86400),
        30.0,
        "seconds before a task is claimed again after its first counted failure (doubles); 0: "
        "at once",
    ),
    Key(
        "failure_backoff_max",
        _number(0, 7 * 86400),
        1800.0,
        "longest wait after a counted failure, in seconds",
    ),
    Key(
        "breaker_threshold",
        _integer(0, 1000),
        3,
        "tasks failing the same way within breaker_window that mark their provider, "
        "workspace or board broken (claims stop for it); 0: off",
    ),
    Key(
        "breaker_window",
        _number(1, 7 * 86400),
        900.0,
        "seconds within which breaker_threshold same failures trip the breaker",
    ),
    Key(
        "breaker_probe_interval",
        _number(1, 7 * 86400),
        600.0,
        "seconds between probes of a broken provider, workspace or board: one run is let "
        "through, and its success clears the breaker",
    ),
    Key("cooldown_base", _number(0, 86400), 60.0, "first capacity cooldown in seconds (doubles)"),
    Key("cooldown_max", _number(0, 7 * 86400), 3600.0, "longest capacity cooldown in seconds"),
    Key(
        "cooldown_limit",
        _integer(1, 100_000),
        24,
        "consecutive cooldowns (capacity, stalls) before a task is blocked",
    ),
    Key(
        "goal_margin",
        _number(0, 86400),
        300.0,
        "goal mode: no new turn with less runtime than this left (seconds)",
    ),
    Key(
        "progress_note_interval",
        _number(0, 7 * 86400),
        1800.0,
        "a comment that a long attempt is still working, this often (seconds); 0: never",
    ),
    Key(
        "worker_env",
        _worker_env,
        (),
        "more variables workers inherit: names, or prefixes ending in '*'",
    ),
    Key("gc_interval", _number(1, 86400), 300.0, "seconds between journal artifact collections"),
    Key("retention_days", _number(0.01, 3650), 30.0, "journal artifacts older than this go"),
    Key("retention_count", _integer(16, 10_000_000), 1024, "journal artifacts kept per board"),
    Key("retention_bytes", _integer(1 << 20, 1 << 42), 128 << 20, "journal bytes kept per board"),
    Key("log_rotate_bytes", _integer(4096, 1 << 40), 64 << 20, "rotate a task log past this size"),
    Key(
        "commit_author",
        _identity,
        "lane-runner <lane-runner@localhost>",
        "author and committer of the commit that holds a task's result: 'Name <email>'",
    ),
    Key(
        "push",
        _choice("never", "on_done"),
        "never",
        "push a done task's branch to push_remote: never, or on_done (never forced)",
    ),
    Key("push_remote", _remote, "origin", "the git remote branches are pushed to"),
    Key(
        "hooks",
        _hooks,
        {},
        "per board ('*': every other): after_create, before_run, after_run, after_done, "
        "before_remove commands and a timeout",
    ),
    Key(
        "delete_branches",
        _boolean,
        False,
        "cleanup also deletes a finished task's branch once it is merged or pushed",
    ),
    Key(
        "prices",
        _prices,
        {},
        "dollars per million tokens per model and kind (input, cached_input, cache_write, "
        "output), for CLIs that report no cost (codex); unpriced spend is 'unknown'",
    ),
    Key(
        "max_cost_usd",
        _optional_number(0, 1e9),
        None,
        "a task's dollar budget unless it has its own (task add --max-cost-usd); empty: none",
    ),
    Key(
        "max_tokens",
        _optional_number(0, 1e15),
        None,
        "a task's token budget unless it has its own (task add --max-tokens); empty: none",
    ),
    Key(
        "daily_budget_usd",
        _daily_budgets,
        {},
        "dollars a board may spend per UTC day, per board ('*': every other); spent: "
        "nothing more is claimed there that day",
    ),
    Key(
        "usage_retention_days",
        _number(0, 36500),
        90.0,
        "the home's usage records older than this go once the board's shared ledger holds "
        "them (never otherwise); 0: keep every record",
    ),
    Key(
        "metrics_port",
        _integer(0, 65535),
        0,
        "Prometheus metrics, /healthz and /readyz on <metrics_address>:<port>; 0: off",
    ),
    Key(
        "metrics_address",
        _ip_address,
        "127.0.0.1",
        "address the metrics port binds: loopback, or 0.0.0.0 / :: in a pod",
    ),
    Key(
        "health_timeout",
        _number(1, 86400),
        120.0,
        "/healthz fails once the loop has not completed a healthy turn for this long (seconds)",
    ),
)
KEYS_BY_NAME = {key.name: key for key in KEYS}
#: Keys a running daemon reads once, at start: the board store and its failure limit,
#: the worker user its home was opened for, the metrics listener. A reload (SIGHUP)
#: keeps their running values and says so; every other key takes effect at once.
MAX_CONFIG_BYTES = 1 << 20
RESTART_KEYS = (
    "board_url",
    "board_connections",
    "board_pooler",
    "board_listen_url",
    "hermes_boards",
    "failure_limit",
    "worker_user",
    "metrics_port",
    "metrics_address",
)


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
            values[name] = _parse(key, raw, "override")
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


SETTINGS_FILE = Path(__file__).with_name("settings.py")


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


def _parse(key: Key, raw: Any, where: str) -> Any:
    try:
        return key.parse(raw)
    except (ValueError, TypeError) as error:
        shown = redact.text(f"{raw!r} ({error})")  # a bad board_url may hold a password
        raise UsageError(f"bad value for {key.name} in {where}: {shown}") from None


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
        values[name] = _parse(KEYS_BY_NAME[name], raw, str(path))
        sources[name] = str(path)
    for variable, raw in environ.items():
        if not variable.startswith(ENV_PREFIX) or variable.startswith(NOT_SETTINGS):
            continue
        name = variable[len(ENV_PREFIX) :].lower()
        if name not in KEYS_BY_NAME:
            settings = (ENV_PREFIX + key.upper() for key in KEYS_BY_NAME)
            raise UsageError(
                f"unknown setting {variable}{suggest.hint(variable, settings)}; "
                "see 'lane-runner config show'"
            )
        values[name] = _parse(KEYS_BY_NAME[name], raw, variable)
        sources[name] = variable
    return Config.of(home, values, sources)
