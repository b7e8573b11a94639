"""Codex CLI adapter: ``codex exec --json`` argv and its event stream.

Events (codex-cli 0.171): ``thread.started{thread_id}`` first, ``turn.started``,
``item.started``/``item.completed`` (reasoning, command_execution, agent_message,
file_change, error...), then ``turn.completed{usage}`` or ``turn.failed{error}``.
Top-level ``{"type":"error"}`` events are transport chatter ("Reconnecting...")
or the final failure text; they never count as progress.
"""

from __future__ import annotations

import json
import logging
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lane_runner import files, redact
from lane_runner.providers import denied, resets, worker_files
from lane_runner.providers.adapter import (
    CLIAdapter,
    Login,
    RunCommand,
    RunsAs,
    mapping,
    shortened,
)
from lane_runner.providers.model import Classification, ProviderRequest
from lane_runner.providers.reading import Reading, result_object
from lane_runner.providers.usage import LimitNotice, UsageReport, tokens
from lane_runner.urls import is_http_url

log = logging.getLogger(__name__)

MAX_RESULT_FILE_BYTES = 1 << 20

#: Why a completed turn without a result object is no answer (``--output-schema`` asks
#: for it as the turn's last message).
NO_FINAL_MESSAGE = (
    "codex ended its turn without a final message holding the result object "
    "(--output-schema): the answer must be the turn's last message"
)
#: Set by the runner on every attempt from its route: an operator's override would
#: contradict the router.
ROUTED_KEYS = frozenset({"model", "model_reasoning_effort"})
#: Chosen by ``codex_sandbox``: one setting says what codex may do (docs/security.md).
POSTURE_KEYS = frozenset({"sandbox_mode", "approval_policy"})
#: ``codex_sandbox``: ``bypass`` (the default: no sandbox, no approvals, as before the
#: setting existed), or codex's own sandbox for the commands its model runs.
BYPASS = "bypass"
SANDBOX_MODES = (BYPASS, "workspace-write", "read-only")
#: The runner's rules file in codex's home (``<CODEX_HOME>/rules``), which codex loads
#: with the operator's own rules at every start.
RULES_NAME = "lane-runner.rules"
#: Providers codex knows without a ``model_providers.<id>`` table.
BUILT_IN_PROVIDERS = frozenset({"openai", "oss", "ollama", "lmstudio"})
_KEY_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
#: codex's usage-limit text names the reset in its local zone: "try again at 3:28 PM",
#: or with a date when it is not today, "try again at Dec 2nd, 2026 2:38 AM".
_TRY_AGAIN = re.compile(
    r"try again at (?:(?P<month>[A-Z][a-z]{2})[a-z]* (?P<day>\d{1,2})(?:st|nd|rd|th)?,? "
    r"(?P<year>\d{4}),? )?(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<meridiem>AM|PM)",
    re.I,
)
_USAGE_LIMIT = re.compile(r"usage limit", re.I)



def toml_literal(value: Any) -> str:
    """``value`` as codex parses a ``-c`` value: TOML (strings, numbers, booleans, arrays,
    inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(
            f"{json.dumps(str(key))} = {toml_literal(item)}" for key, item in value.items()
        ) + "}"
    raise ValueError(f"{value!r} has no TOML spelling codex reads")


def override_flags(settings: Mapping[str, Any]) -> list[str]:
    pairs = (f"{key}={toml_literal(value)}" for key, value in settings.items())
    return [arg for pair in pairs for arg in ("-c", pair)]



def _worker_defines(provider: str, env: Mapping[str, str]) -> bool:
    """Whether the worker's own ``config.toml`` (under ``CODEX_HOME``, else
    ``~/.codex``) has a ``[model_providers.<provider>]`` table."""
    home = codex_home(env)
    try:  # the worker's file: never through a link, never a FIFO, never unbounded
        with files.open_reader(home / "config.toml") as reader:
            document = tomllib.loads(reader.read(MAX_RESULT_FILE_BYTES).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        log.debug("no worker codex config to read at %s: %s", home, error)
        return False
    providers = document.get("model_providers")
    return isinstance(providers, dict) and provider in providers


def _variables(table: Mapping[str, Any]) -> list[str]:
    """The variables a provider table names: its ``env_key`` and ``env_http_headers``."""
    names = [table["env_key"]] if isinstance(table.get("env_key"), str) else []
    headers = {key[len("env_http_headers."):]: value for key, value in table.items()
               if key.startswith("env_http_headers.")}
    return names + [value for value in headers.values() if isinstance(value, str)]


def bypass_flags(mode: str | None) -> list[str]:
    """``bypass`` (or no choice): codex's sandbox and approvals both off, before ``exec``
    as the runner has always passed it."""
    return ["--dangerously-bypass-approvals-and-sandbox"] if (mode or BYPASS) == BYPASS else []


def sandbox_flags(mode: str | None) -> list[str]:
    """Codex's own sandbox ``mode`` as ``-c`` overrides, which ``exec`` and ``exec resume``
    both take (``--sandbox`` is not an option of ``exec resume``), with approvals
    never asked: nobody is there to answer, so a command the sandbox refuses fails
    and the model is told so. Outside the bypass codex also asks that its directory be
    a trusted git repository; the workspace is the task's own worktree, so that check
    is skipped as the bypass skips it. Nothing for ``bypass``."""
    if (mode or BYPASS) == BYPASS:
        return []
    if mode not in SANDBOX_MODES:
        raise ValueError(f"codex_sandbox {mode!r}: expected one of {', '.join(SANDBOX_MODES)}")
    return [
        "-c", f'sandbox_mode="{mode}"', "-c", 'approval_policy="never"', "--skip-git-repo-check"
    ]


def rules_text() -> str:
    """The deny list (``denied.py``) as a codex execpolicy rules file: each prefix
    ``forbidden``, which codex enforces whatever its approval policy and sandbox (a
    forbidden command is refused, never run, and the model is told why)."""
    rules = [
        f"prefix_rule(\n    pattern = {json.dumps(list(command))},\n"
        f'    decision = "forbidden",\n    justification = {json.dumps(denied.REASON)},\n)\n'
        for command in denied.DENIED_COMMANDS
    ]
    return "# Written by lane-runner before every codex start; edits are replaced.\n" + "".join(
        rules
    )


def codex_home(env: Mapping[str, str]) -> Path:
    """Where codex keeps its settings, logins and rules for a worker with ``env``:
    ``CODEX_HOME``, else ``~/.codex``."""
    return Path(env.get("CODEX_HOME") or str(Path(env.get("HOME") or "/nonexistent") / ".codex"))


def rules_file(env: Mapping[str, str]) -> Path:
    """The runner's rules file in the codex home of a worker with ``env``."""
    return codex_home(env) / "rules" / RULES_NAME


#: Item types that are a tool at work: codex starts them (``item.started``), the tool
#: runs (a build, a test suite) and they complete (``item.completed``) when it ends.
TOOL_ITEMS = frozenset({"command_execution"})



def usage_of(event: dict[str, Any], thread_id: str | None, model: str) -> UsageReport | None:
    """``turn.completed.usage`` as a report: the thread's running total (a resumed thread
    counts on from where it was, the turns of a killed attempt included), for the model
    the attempt ran. ``input_tokens`` includes the cached and cache-written ones and
    ``output_tokens`` the reasoning ones, as in OpenAI's usage."""
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return None
    counts = tokens(
        input=usage.get("input_tokens"),
        cached_input=usage.get("cached_input_tokens"),
        cache_write=usage.get("cache_write_input_tokens"),
        output=usage.get("output_tokens"),
        reasoning=usage.get("reasoning_output_tokens"),
    )
    spent = counts.tokens
    spent["input"] = max(0, spent["input"] - spent["cached_input"] - spent["cache_write"])
    return UsageReport("cumulative", thread_id, {model: spent}, unknown=counts.unknown)


def limit_of(text: str, now: float, zone_name: str | None) -> LimitNotice | None:
    """A usage limit in codex's words, with the reset its "try again at" names (read in
    the CLI's zone ``zone_name``), or None when the text is no usage limit."""
    if not _USAGE_LIMIT.search(text):
        return None
    found = _TRY_AGAIN.search(text)
    where = resets.zone(zone_name)
    if found is None or where is None:
        return LimitNotice(text[:500], None)
    parts = found.groupdict()
    moment = resets.wall_time(
        now, where, int(parts["hour"]), int(parts["minute"]), parts["meridiem"],
        month=parts["month"], day=int(parts["day"]) if parts["day"] else None,
        year=int(parts["year"]) if parts["year"] else None,
    )
    return LimitNotice(text[:500], moment)



def _read_thread(reading: Reading, event: dict[str, Any]) -> bool:
    """``thread.started``: the session to resume."""
    thread_id = event.get("thread_id")
    if isinstance(thread_id, str) and thread_id:
        reading.session_id = thread_id
    return True


def _read_error(reading: Reading, event: dict[str, Any]) -> bool:
    """``error``: one of codex's errors (a limit it may announce); not progress."""
    message = str(event.get("message", ""))
    reading.heard_error(message, limit_of(message, reading.clock(), reading.zone))
    return False


def _read_turn_failed(reading: Reading, event: dict[str, Any]) -> bool:
    """``turn.failed``: the attempt is over, with its error (a limit it may announce)."""
    error = event.get("error")
    message = str((error.get("message") if isinstance(error, dict) else error) or "")
    reading.heard_error(message or "turn failed",
                        limit_of(message, reading.clock(), reading.zone))
    reading.finished = True
    return True


def _read_turn_completed(reading: Reading, event: dict[str, Any]) -> bool:
    """``turn.completed``: the attempt is over, with its usage; no final message is an
    unanswered attempt."""
    reading.finished = True
    report = usage_of(event, reading.session_id, reading.model)
    if report is not None:
        reading.usage.append(report)
    if reading.candidate is None:
        reading.unanswered = NO_FINAL_MESSAGE
    return True


def _read_item(reading: Reading, event: dict[str, Any]) -> bool:
    """Any other event: a completed agent message is the answer so far; an error item
    (a warning, "Falling back from WebSockets...") is not work."""
    item = event.get("item")
    if not isinstance(item, dict):
        return True
    if item.get("type") == "error":
        return False
    if event.get("type") == "item.completed" and item.get("type") == "agent_message":
        reading.candidate = result_object(item.get("text"), reading.shape) or reading.candidate
    return True


_READERS: dict[str, Callable[[Reading, dict[str, Any]], bool]] = {
    "thread.started": _read_thread,
    "error": _read_error,
    "turn.failed": _read_turn_failed,
    "turn.completed": _read_turn_completed,
}
"""How ``Codex.observe`` reads each event type; ``_read_item`` reads the rest."""


def _turn_completed_line(event: dict[str, Any]) -> str:
    usage = mapping(event.get("usage"))
    tokens = f"tokens in {usage.get('input_tokens')}, out {usage.get('output_tokens')}"
    return f"turn completed ({tokens})"


def _turn_failed_line(event: dict[str, Any]) -> str:
    error = event.get("error")
    said = error.get("message") if isinstance(error, dict) else error
    return f"turn FAILED: {shortened(said)}"


_EVENT_LINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "thread.started": lambda event: f"codex thread {event.get('thread_id')}",
    "turn.completed": _turn_completed_line,
    "turn.failed": _turn_failed_line,
    "error": lambda event: f"error: {shortened(event.get('message'))}",
}
"""``Codex.describe``'s line for each event type other than a completed item."""

_TEXT_ITEMS = {"agent_message": "codex: ", "reasoning": "(thinking) "}


def _item_line(item: dict[str, Any]) -> str:
    """A completed item for people: a command with its exit, the paths a change edited,
    the agent's words or thinking, else the item's type and text."""
    what = item.get("type")
    if what == "command_execution":
        return f"$ {shortened(item.get('command'))} (exit {item.get('exit_code')})"
    if what == "file_change":
        changes = item.get("changes") or []
        paths = ", ".join(str(c.get("path")) for c in changes if isinstance(c, dict))
        return f"edit {shortened(paths)}"
    if isinstance(what, str) and what in _TEXT_ITEMS:
        return f"{_TEXT_ITEMS[what]}{shortened(item.get('text'))}"
    return f"{what}: {shortened(item.get('text') or item.get('message') or '')}"


class Codex(CLIAdapter):
    """``codex exec --json``: codex names its thread, writes its answer to ``-o``, and
    takes its own settings as ``-c`` overrides (``codex_config``)."""

    name = "codex"
    command = "codex"
    version_identity = re.compile(r"\bcodex-cli\b")  # "codex-cli 0.171.0"
    env_prefixes = ("CODEX_", "OPENAI_API_KEY")
    model_prefix = "gpt-"
    default_models = {
        "low": "gpt-5.1-codex-mini",
        "medium": "gpt-5.1-codex",
        "high": "gpt-5.1-codex",
        "xhigh": "gpt-5.1-codex-max",
    }
    takes_config = True
    config_help = "codex settings passed as -c key=value (model_provider, model_providers.<id>...)"
    env_help = "variables set for codex workers (the gateway's key)"
    sandbox_modes = SANDBOX_MODES
    sandbox_help = (
        "what codex may do: bypass (no sandbox, no approvals), workspace-write or "
        "read-only (codex's own sandbox; needs user namespaces, see docs/security.md)"
    )
    denies_by = f"an execpolicy rules file, <CODEX_HOME>/rules/{RULES_NAME}"
    writes_result_file = True
    #: "no rollout found for thread id": a fresh thread, reported through ``on_session``.
    session_fallbacks = {(True, Classification.SESSION_MISSING): False}
    failure_texts = {
        Classification.SESSION_MISSING: (r"no rollout found for thread id",),
        Classification.MISCONFIGURED: (
            # clap's usage errors, and a schema the API will not take
            r"^error: (?:unexpected argument|a value is required for|invalid value)",
            r"invalid schema for response_format",
            # the model gateway the operator configured (codex_config, codex_env)
            r"model provider `[^`]*` not found|missing environment variable",
            r"error loading config\.toml|model `[^`]*` does not exist|unexpected status 404\b",
        ),
        # the API failing after codex's own retries (a 5xx)
        Classification.CAPACITY: (r"experiencing high demand",),
        Classification.REFUSED: (
            r"context window|context_length_exceeded|unexpected status 400\b",
        ),
    }
    #: Reconnects while it waits for its service: not progress, not yet a verdict.
    noise_texts = (r"^\s*reconnecting\b",)
    #: Its reconnects spent (offline, or no credentials it can use), it waits for ever.
    gave_up_texts = (r"^\s*reconnecting\.\.\. waiting for network",)

    #: The API, and ChatGPT's sign-in and its codex backend for a ChatGPT login.
    egress_hosts = ("api.openai.com", "chatgpt.com", "auth.openai.com")

    def config_settings(self, table: Mapping[str, Any]) -> dict[str, Any]:
        """``codex_config`` as flat ``dotted.key: value`` pairs, each one ``-c key=value``.

        Nested tables are walked down to their leaves, so ``model_providers.gateway`` adds
        one provider to those of the worker's own ``config.toml`` instead of replacing the
        whole table. ValueError names a key codex must not get from here.
        """
        flat: dict[str, Any] = {}

        def walk(prefix: str, node: Mapping[str, Any]) -> None:
            for key, value in node.items():
                path = f"{prefix}{key}"
                if not _KEY_SEGMENT.fullmatch(key):
                    raise ValueError(f"{path!r}: key parts are letters, digits, '_' and '-'")
                if isinstance(value, dict) and value:
                    walk(f"{path}.", value)
                    continue
                if path in ROUTED_KEYS:
                    raise ValueError(f"{path!r} is chosen by the router for each attempt")
                if path in POSTURE_KEYS:
                    raise ValueError(f"{path!r} is chosen by codex_sandbox (docs/security.md)")
                if redact.SECRET_NAME.search(key) or redact.url(str(value)) != str(value):
                    # On the command line every local user could read it (/proc/<pid>/cmdline).
                    raise ValueError(
                        f"{path!r} would put a credential on codex's command line, which every "
                        "local user can read; name a variable instead (env_key, env_http_headers) "
                        "and set it in codex_env"
                    )
                toml_literal(value)  # refuses what has no TOML spelling
                flat[path] = value

        walk("", table)
        return flat

    def writable_homes(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """``CODEX_HOME`` (else ``~/.codex``): its sessions, login and rules."""
        return (codex_home(env),)

    def settled_files(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """Its ``config.toml`` (MCP servers, ``notify`` commands) and execpolicy rules."""
        return codex_home(env) / "config.toml", codex_home(env) / "rules"

    def prepare(self, req: ProviderRequest) -> None:
        """The deny list as a rules file in the worker's codex home, written as the
        worker (its home is the worker's to own), before every start: a worker that
        removed or edited it gets it back."""
        worker_files.publish(rules_file(req.env), rules_text().encode(), req.run_as)

    def argv(
        self, req: ProviderRequest, *, resume: bool, result_file: Path, schema: str
    ) -> list[str]:
        """A new thread, else ``exec resume`` of the session ``req`` names; the prompt
        comes on stdin (``-``).

        The operator's ``codex_config`` overrides come first, so the runner's own flags
        (model, effort, schema, sandbox) are the ones codex keeps.

        ``exec resume`` has no ``-C``: it runs in its working directory, which the
        supervisor sets to the workspace for both forms. ``--dangerously-bypass-hook-trust``
        lets the hooks a workspace enables run without a person persisting trust
        first: nobody is there to answer, and the workspace is the task's own.
        """
        thread_id = req.session_id if resume else None
        common = [
            "--json",
            *override_flags(req.config_overrides),
            *sandbox_flags(req.sandbox),
            "-m",
            req.model,
            "-c",
            f'model_reasoning_effort="{req.effort}"',
            "--output-schema",
            str(req.schema_path),
            "-o",
            str(result_file),
        ]
        head = [
            str(req.executable),
            *bypass_flags(req.sandbox),
            "--dangerously-bypass-hook-trust",
            "exec",
        ]
        if thread_id:
            return [*head, "resume", *common, thread_id, "-"]
        return [*head, *common, "-C", str(req.workspace), "-"]

    def observe(self, reading: Reading, event: dict[str, Any]) -> bool:
        """Fold one event into ``reading``; True when it is meaningful progress."""
        return _READERS.get(str(event.get("type")), _read_item)(reading, event)

    def track_tools(self, tools: set[str], event: dict[str, Any]) -> None:
        """Keep ``tools`` the ids of the command executions begun and not yet completed: while
        one is in flight, codex prints nothing until the command ends (docs/ARCHITECTURE.md §6)."""
        kind, item = event.get("type"), event.get("item")
        if kind in ("turn.completed", "turn.failed"):
            tools.clear()
            return
        if not isinstance(item, dict) or item.get("type") not in TOOL_ITEMS:
            return
        item_id = item.get("id")
        if not isinstance(item_id, str):
            return
        if kind == "item.started":
            tools.add(item_id)
        elif kind == "item.completed":
            tools.discard(item_id)

    def file_result(self, result_file: Path) -> dict[str, Any] | None:
        """The ``-o`` file's result object: the authoritative answer when present."""
        try:
            # The worker may own this directory: a link or FIFO there is moved aside, not read.
            data = files.read(result_file, MAX_RESULT_FILE_BYTES)
        except FileNotFoundError:
            return None
        except OSError as error:
            log.warning(
                "codex result file %s unreadable, the stream's answer stands: %s",
                result_file,
                error,
            )
            return None
        if len(data) > MAX_RESULT_FILE_BYTES:
            log.warning(
                "codex result file %s exceeds %d bytes; ignored", result_file, MAX_RESULT_FILE_BYTES
            )
            return None
        return result_object(data.decode("utf-8", "replace"))

    def gateway(
        self, settings: Mapping[str, Any], env: Mapping[str, str]
    ) -> tuple[str | None, list[str]]:
        """Where codex will send its requests under ``codex_config`` and the worker's
        environment ``env`` (None: OpenAI itself), and what will stop it from starting.

        Each problem is what codex would otherwise say at the first attempt ("Model
        provider `x` not found", "Missing environment variable", "`wire_api = "chat"` is no
        longer supported"), found before any task is spent on it.
        """
        provider = str(settings.get("model_provider") or "openai")
        prefix = f"model_providers.{provider}."
        table = {
            key[len(prefix):]: value for key, value in settings.items() if key.startswith(prefix)
        }
        problems: list[str] = []
        if provider in BUILT_IN_PROVIDERS and not table:
            return None, problems
        if not table:
            if not _worker_defines(provider, env):
                problems.append(
                    f"model_provider {provider!r} is defined neither in codex_config nor in the "
                    f"worker's codex config.toml: codex would say 'Model provider `{provider}` "
                    "not found'"
                )
            return None, problems
        base_url = table.get("base_url")
        if not isinstance(base_url, str) or not is_http_url(base_url):
            problems.append(f"{prefix}base_url must be an http:// or https:// URL with a host")
            base_url = None
        if table.get("wire_api", "responses") != "responses":
            problems.append(f'{prefix}wire_api: this codex speaks only wire_api = "responses"')
        for variable in _variables(table):
            if not env.get(variable):
                problems.append(
                    f"{variable} (named by {prefix[:-1]}) does not reach the worker: set it in "
                    "codex_env, or export it and add it to worker_env"
                )
        return base_url, problems

    def login(
        self, executable: Path, runs: RunsAs, env: Mapping[str, str], run: RunCommand
    ) -> Login:
        """``codex login status``: exit 0 when logged in (ChatGPT or an API key)."""
        said, status = run([str(executable), "login", "status"])
        if status == 0:
            return Login(True, said)
        fix = (
            f"as {runs.who()}: {runs.sudo('codex login')} (or pipe an API key into "
            f"{runs.sudo('codex login --with-api-key')})"
        )
        return Login(False, f"not logged in as {runs.who()}: codex login status said: {said}", fix)

    def speaks(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        return isinstance(kind, str) and (
            kind.startswith(("thread.", "turn.", "item."))
            or (kind == "error" and "timestamp" not in event)  # opencode's and gemini's have one
        )

    def describe(self, event: dict[str, Any]) -> str | None:
        """One event for people: tool calls to their command or path, markers to None."""
        kind = event.get("type")
        if kind == "item.completed":
            return _item_line(mapping(event.get("item")))
        line = _EVENT_LINES.get(str(kind))
        return line(event) if line is not None else None



ADAPTER = Codex()
