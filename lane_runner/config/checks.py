"""The value checks: each parser takes a TOML value (from ``config.toml``) or an
environment string (``LANE_RUNNER_<KEY>``) and returns the key's typed value, or raises
ValueError saying what was expected; ``effective.parse`` turns that into an error that
names the key. They are the package's own (``keys`` declares which key each checks).
"""

from __future__ import annotations

import ipaddress
import math
import re
import tomllib
from collections.abc import Callable
from string import Formatter
from typing import Any
from urllib.parse import urlsplit

import httpx

from lane_runner.names import (
    EFFORTS,
    MODEL_RULE,
    PROVIDERS,
    is_lane_assignee,
    is_model_name,
    is_valid_name,
)
from lane_runner.providers import Provider, sandbox
from lane_runner.providers.egress import Destination


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


_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def _user_names(value: Any) -> tuple[str, ...]:
    """Login names, each once: a list, or text separated by commas.

    A name the system could not have (a space, a capital, a path) is refused here, so a
    typo is named at load instead of failing every run of the slot it was given."""
    items = value if isinstance(value, list) else _text(value).split(",")
    names = tuple(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))
    for name in names:
        if not _USER.fullmatch(name):
            raise ValueError(f"{name!r} is not a user name (e.g. lane-w1)")
    return names


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


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8480`` for IPv6) as an IP address and a port: what the web
    console binds. Raises ValueError saying what was expected."""
    wanted = "expected HOST:PORT with an IP address, such as 127.0.0.1:8480 or [::]:8480"
    host, colon, port = text.strip().rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(wanted)
    try:
        return str(ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))), int(port)
    except ValueError:
        raise ValueError(wanted) from None


def _listen(value: Any) -> str | None:
    """The web console's ``HOST:PORT``, or empty for none (``listen_address``)."""
    text = _text(value).strip()
    if not text:
        return None
    listen_address(text)
    return text


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _text(value).strip()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def _model_pairs(text: str) -> list[tuple[Any, Any]]:
    """``low=m1,high=m2`` (from the environment) as (effort, model) pairs."""
    items = [item for item in text.split(",") if item.strip()]
    if any("=" not in item for item in items):
        raise ValueError("expected effort=model pairs separated by commas")
    return [(effort, model) for effort, _, model in (i.partition("=") for i in items)]


def _models(value: Any) -> dict[str, str]:
    """Models per effort: a TOML table, or ``low=m1,high=m2`` from the environment."""
    pairs = list(value.items()) if isinstance(value, dict) else _model_pairs(_text(value))
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


#: What ``review`` may say besides a provider's name (``run/verifying.py``).
REVIEW_OFF, REVIEW_AUTO = "off", "auto"


def _per_board(value: Any, name: str, example: str) -> dict[str, Any]:
    """A table of boards (``"*"``: every board without its own entry); a value that is
    no table is every board's. From the environment: inline TOML."""
    if isinstance(value, str) and value.strip().startswith(("{", "[")):
        value = _toml_table(value, name, example)
    if not isinstance(value, dict):
        return {"*": value}
    for board in value:
        if board != "*" and not is_valid_name(board):
            raise ValueError(f"{board!r} is not a board name (or '*' for every board)")
    return dict(value)


def _checks(value: Any) -> dict[str, list[str]]:
    """Acceptance checks: shell commands run in a task's worktree after each completed
    answer (``run/checks.py``), per board or for every board (a plain list)."""
    boards = _per_board(value, "checks", '["pytest -q"] or {main = ["pytest -q"]}')
    table: dict[str, list[str]] = {}
    for board, commands in boards.items():
        if isinstance(commands, str):
            commands = [commands] if commands.strip() else []
        if not isinstance(commands, list) or not all(
            isinstance(item, str) and item.strip() and "\x00" not in item for item in commands
        ):
            raise ValueError(f"checks.{board}: expected a list of shell commands")
        table[board] = list(commands)
    return table


def _review(value: Any) -> dict[str, str]:
    """Who reviews a result whose checks passed: ``off``, ``auto`` (a provider other than
    the implementer's) or a provider's name, per board or for every board."""
    boards = _per_board(value, "review", '"auto" or {main = "auto"}')
    return {board: review_choice(said) for board, said in boards.items()}


def review_choice(value: Any) -> str:
    """One review setting: ``off``, ``auto`` or a provider (a task's ``--review`` too)."""
    text = _text(value).strip()
    if text not in (REVIEW_OFF, REVIEW_AUTO, *PROVIDERS):
        choices = ", ".join((REVIEW_OFF, REVIEW_AUTO, *PROVIDERS))
        raise ValueError(f"review: expected one of {choices}, not {text!r}")
    return text
