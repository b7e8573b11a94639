"""Claude Code adapter: ``claude -p --output-format stream-json`` argv and events.

Events (Claude Code 2.1): ``system/init`` with ``session_id``, ``assistant`` and
``user`` (tool results) messages, then one ``result`` event carrying
``structured_output`` (with ``--json-schema``), ``result`` text and ``is_error``.
``is_error: true`` is a failure even when ``subtype`` says ``success`` (that is
how "Not logged in" arrives).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from lane_runner.providers import denied, resets
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

#: The runner's deny list (``denied.py``) as claude's permission rules: a Bash call whose
#: command begins with a denied prefix is refused.
DENIED_TOOLS = tuple(f"Bash({denied.spelled(command)} *)" for command in denied.DENIED_COMMANDS)


#: What ``--settings`` gives every worker (``Claude.settings_file``): no prompt that only a
#: person could answer, the same denials as ``--disallowedTools`` (a second line
#: of defence), and no self-update or background traffic, so the version the
#: contract suite pinned is the one that runs.
SETTINGS: dict[str, Any] = {
    "skipDangerousModePermissionPrompt": True,
    "permissions": {"deny": list(DENIED_TOOLS)},
    "env": {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
}


#: Why a clean ``result`` without ``structured_output`` is no answer: ``--json-schema``
#: takes the answer only through its ``StructuredOutput`` tool (the CLI reminds the model
#: once, then ends with ``subtype: success`` and no answer).
NO_STRUCTURED_OUTPUT = (
    "claude ended without calling the StructuredOutput tool: the answer counts only when "
    "it is given by calling StructuredOutput with the result object"
)


#: claude's limit text: "You've hit your 5-hour limit · resets 2:38am (UTC)", "… resets
#: 8pm (America/New_York)"; further away with a date ("resets Dec 3, 5pm (UTC)").
_RESETS = re.compile(
    r"resets (?:(?P<month>[A-Z][a-z]{2})[a-z]* (?P<day>\d{1,2})(?:st|nd|rd|th)?,? (?:at )?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<meridiem>am|pm)\s*(?:\((?P<zone>[^)]+)\))?",
    re.I,
)
_LIMIT_WORDS = re.compile(r"hit your [^.·\n]*limit|usage limit|session limit", re.I)
#: The model name claude gives the messages it makes up itself (an API error shown as
#: an assistant message): no model spent anything on them.
SYNTHETIC_MODEL = "<synthetic>"



def budget_flags(dollars: float | None) -> list[str]:
    """``--max-budget-usd`` for what is left of the task's budget: claude stops itself
    there, besides the runner's own watch of the spend."""
    if dollars is None:
        return []
    return ["--max-budget-usd", f"{max(dollars, 0.0):.4f}"]



def _read_message(reading: Reading, event: dict[str, Any]) -> None:
    """An assistant message's usage (one model response), and a limit it may announce."""
    message = event.get("message")
    if not isinstance(message, dict):
        return
    report = message_usage_of(message, reading.session_id)
    if report is not None:
        reading.usage.append(report)
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            said = limit_of(
                str(block.get("text") or ""), reading.clock(), reading.zone, reading.limit
            )
            reading.limit = said or reading.limit


def _read_result(reading: Reading, event: dict[str, Any]) -> None:
    """The final ``result`` event: the attempt's usage, then its answer (the structured
    output) or, when it is an error, its errors and a limit they may announce."""
    reading.finished = True
    report = result_usage_of(event, reading.session_id)
    if report is not None:
        reading.usage.append(report)
    if event.get("is_error") is True:
        _read_failure(reading, event)
        return
    reading.candidate = result_object(
        event.get("structured_output"), reading.shape
    ) or result_object(event.get("result"), reading.shape)
    if reading.candidate is None:
        reading.unanswered = NO_STRUCTURED_OUTPUT


def _read_failure(reading: Reading, event: dict[str, Any]) -> None:
    """An error ``result``: a usage limit its text announces, and every error it names."""
    said = limit_of(str(event.get("result") or ""), reading.clock(), reading.zone, reading.limit)
    reading.limit = said or reading.limit
    reading.signals.result_is_error = True
    for text in [event.get("result"), *(event.get("errors") or [])]:
        if text:
            reading.signals.add_error(str(text))


def message_usage_of(message: dict[str, Any], session_id: str | None) -> UsageReport | None:
    """One response's usage as the stream shows it: its input is final, its output is
    only what the response began with (the final count comes with ``result``), so it
    is what a response of an attempt killed before its ``result`` is known to have spent."""
    usage, model, key = message.get("usage"), message.get("model"), message.get("id")
    if not isinstance(usage, dict) or not isinstance(model, str) or not isinstance(key, str):
        return None
    if model == SYNTHETIC_MODEL:
        return None
    counts = tokens(
        input=usage.get("input_tokens"),
        cached_input=usage.get("cache_read_input_tokens"),
        cache_write=usage.get("cache_creation_input_tokens"),
        output=usage.get("output_tokens"),
    )
    return UsageReport("message", session_id, {model: counts.tokens}, key=key,
                       unknown=counts.unknown)


def result_usage_of(event: dict[str, Any], session_id: str | None) -> UsageReport | None:
    """``result``'s ``modelUsage``: tokens and dollars per model, counted across every
    ``--resume`` of the session that ended normally (``usage`` is this invocation's
    only, so it is not the one read)."""
    per_model = event.get("modelUsage")
    if not isinstance(per_model, dict):
        return None
    models: dict[str, dict[str, int]] = {}
    costs: dict[str, float] = {}
    unknown: set[str] = set()
    for model, figures in per_model.items():
        if not isinstance(figures, dict) or model == SYNTHETIC_MODEL:
            continue
        counts = tokens(
            input=figures.get("inputTokens"),
            cached_input=figures.get("cacheReadInputTokens"),
            cache_write=figures.get("cacheCreationInputTokens"),
            output=figures.get("outputTokens"),
            reasoning=figures.get("thinkingTokens"),
        )
        models[model] = counts.tokens
        unknown.update(counts.unknown)
        cost = figures.get("costUSD")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            costs[model] = float(cost)
    if not models:
        return None
    return UsageReport("cumulative", session_id, models, costs, unknown=tuple(sorted(unknown)))


def rate_limit_of(event: dict[str, Any]) -> LimitNotice | None:
    """A ``rate_limit_event`` that refuses (``status: rejected``), with its ``resetsAt``;
    ``allowed`` and ``allowed_warning`` are no limit yet."""
    info = event.get("rate_limit_info")
    if not isinstance(info, dict) or info.get("status") != "rejected":
        return None
    at = info.get("resetsAt")
    kind = info.get("rateLimitType") or "usage"
    moment = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None
    return LimitNotice(f"claude rate_limit_event: {kind} limit rejected", moment)


def limit_of(
    text: str, now: float, zone_name: str | None = None, known: LimitNotice | None = None
) -> LimitNotice | None:
    """A usage limit in claude's words, with the reset its "resets …" names (in the zone
    it names, else the CLI's ``zone_name``); a reset a ``rate_limit_event`` already gave
    (``known``) stands where the words name none."""
    if not _LIMIT_WORDS.search(text):
        return None
    earlier = known.resets_at if known is not None else None
    found = _RESETS.search(text)
    if found is None:
        return LimitNotice(text[:500], earlier)
    parts = found.groupdict()
    where = resets.zone(parts["zone"] or zone_name)
    moment = None if where is None else resets.wall_time(
        now, where, int(parts["hour"]), int(parts["minute"] or 0), parts["meridiem"],
        month=parts["month"], day=int(parts["day"]) if parts["day"] else None,
    )
    return LimitNotice(text[:500], earlier if earlier is not None else moment)



def sandbox_declared(environ: Mapping[str, str]) -> bool:
    """The environment says this is a disposable sandbox, the claude root guard's escape."""
    return environ.get("IS_SANDBOX") == "1" or environ.get("CLAUDE_CODE_BUBBLEWRAP") == "1"


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")



#: Where claude finds a login besides its credentials file (``doctor``).
SECRETS = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")
CREDENTIALS = ".credentials.json"


class Claude(CLIAdapter):
    """``claude -p --output-format stream-json``: the runner reserves the session id,
    the schema goes inline, settings come from the environment and ``--settings``."""

    name = "claude"
    command = "claude"
    version_identity = re.compile(r"\(Claude Code\)")  # "2.1.332 (Claude Code)"
    env_prefixes = ("CLAUDE_", "ANTHROPIC_", "IS_SANDBOX")
    model_prefix = "claude-"
    default_models = {
        "low": "claude-haiku-4-5",
        "medium": "claude-sonnet-4-5",
        "high": "claude-sonnet-4-5",
        "xhigh": "claude-opus-4-5",
    }
    env_help = "variables set for claude workers (ANTHROPIC_BASE_URL, CLAUDE_CODE_USE_BEDROCK...)"
    denies_by = "--disallowedTools, and permissions.deny in its --settings file"
    reserves_session = True
    inline_schema = True
    #: "Session ID already in use" on a fresh start: resume it; "No conversation found"
    #: on resume: start that reserved id fresh.
    session_fallbacks = {
        (False, Classification.SESSION_COLLISION): True,
        (True, Classification.SESSION_MISSING): False,
    }
    failure_texts = {
        Classification.SESSION_MISSING: (r"no conversation found with session id",),
        Classification.SESSION_COLLISION: (r"session id (?:\S+ )?(?:is )?already in use",),
        Classification.MISCONFIGURED: (
            # commander's usage errors, a schema or settings file it will not take, the
            # root refusal ("strict mode: ..." lines are warnings, not refusals)
            r"^error: (?:unknown option|too many arguments|option '[^']*' argument missing)",
            r"--json-schema is not (?:a )?valid JSON|settings file not found",
            r"invalid session id\. must be a valid uuid|cannot be used with root/sudo privileges",
            # the model gateway the operator configured (claude_env)
            r"issue with the selected model",
        ),
        Classification.AUTH: (r"not logged in|please run /login",),
        # the API failing after claude's own retries (a 5xx); a claude.ai login's limit
        # ("You've hit your 5-hour limit · resets 2:38am (UTC)")
        Classification.CAPACITY: (r"server-side issue", r"hit your [\w -]*limit"),
        Classification.REFUSED: (r"prompt is too long|api error: 400\b",),
    }

    #: The API, and claude.ai's sign-in for a subscription login.
    egress_hosts = ("api.anthropic.com", "claude.ai", "console.anthropic.com")

    def argv(
        self, req: ProviderRequest, *, resume: bool, result_file: Path, schema: str
    ) -> list[str]:
        """``--session-id`` on the first start of a reserved id, ``--resume`` after.

        ``--disallowedTools`` is variadic, so it must be followed by another option,
        never by a positional (the prompt comes on stdin anyway). ``--autocompact auto``
        lets a long goal turn compact its context instead of failing at the window.
        """
        return [
            str(req.executable),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--json-schema",
            schema,
            "--model",
            req.model,
            "--effort",
            req.effort,
            "--dangerously-skip-permissions",
            "--autocompact",
            "auto",
            "--settings",
            str(req.settings_path),
            *budget_flags(req.max_budget_usd),
            "--disallowedTools",
            *DENIED_TOOLS,
            "--resume" if resume else "--session-id",
            str(req.session_id),
        ]

    def writable_homes(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """``CLAUDE_CONFIG_DIR`` (its sessions, login and state), else ``~/.claude`` and
        the ``~/.claude.json`` claude keeps beside it."""
        if env.get("CLAUDE_CONFIG_DIR"):
            return (Path(env["CLAUDE_CONFIG_DIR"]),)
        home = Path(env.get("HOME") or "/nonexistent")
        return home / ".claude", home / ".claude.json"

    def settled_files(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """Its user settings (hooks, permissions), memory, commands, agents and plugins."""
        home = Path(env.get("HOME") or "/nonexistent")
        config = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
        names = ("settings.json", "settings.local.json", "CLAUDE.md", "commands", "agents",
                 "hooks", "plugins", "skills")
        return tuple(config / name for name in names)

    def observe(self, reading: Reading, event: dict[str, Any]) -> bool:
        """Fold one event into ``reading``; True unless it is API retry chatter."""
        session_id = event.get("session_id")
        if isinstance(session_id, str) and session_id and reading.session_id is None:
            reading.session_id = session_id
        kind = event.get("type")
        if kind == "system":
            return event.get("subtype") != "api_retry"
        if kind == "assistant":
            if isinstance(event.get("error"), str):
                reading.signals.add_error(event["error"])
            _read_message(reading, event)
        elif kind == "rate_limit_event":
            reading.limit = rate_limit_of(event) or reading.limit
            return False
        elif kind == "result":
            _read_result(reading, event)
        return True

    def track_tools(self, tools: set[str], event: dict[str, Any]) -> None:
        """Keep ``tools`` the ids of the ``tool_use`` blocks of assistant messages not yet
        answered by a ``tool_result`` of a user message: while a Bash call runs, claude
        prints nothing until it returns (docs/ARCHITECTURE.md §6)."""
        kind = event.get("type")
        if kind == "result":
            tools.clear()
            return
        if kind not in ("assistant", "user"):
            return
        for block in _blocks(event):
            if kind == "assistant" and block.get("type") == "tool_use":
                tools.add(str(block.get("id")))
            elif kind == "user" and block.get("type") == "tool_result":
                tools.discard(str(block.get("tool_use_id")))

    def root_refusal(
        self,
        run_as: str | None,
        euid: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> str | None:
        """Why a claude lane cannot start here, or None.

        Claude refuses ``--dangerously-skip-permissions`` as root unless the
        environment declares a disposable sandbox (``IS_SANDBOX=1`` or
        ``CLAUDE_CODE_BUBBLEWRAP=1``, the CLI's own two escapes). Without a worker
        user or such a declaration the lane must fail at once with this message
        instead of a bare exit 1.
        """
        if run_as or (os.geteuid() if euid is None else euid) != 0:
            return None
        if sandbox_declared(os.environ if environ is None else environ):
            return None
        return (
            "claude refuses --dangerously-skip-permissions as root; set worker_user "
            "(LANE_RUNNER_WORKER_USER) to an unprivileged user, or export IS_SANDBOX=1 "
            "if this host is a disposable sandbox"
        )

    def gateway(
        self, settings: Mapping[str, Any], env: Mapping[str, str]
    ) -> tuple[str | None, list[str]]:
        """Where claude will send its requests with the worker's environment ``env`` (None:
        Anthropic's own API, or the cloud's default endpoint), and what will stop it.

        ``ANTHROPIC_BASE_URL`` names an Anthropic-compatible gateway, which takes the key of
        ``ANTHROPIC_API_KEY`` (``x-api-key``) or ``ANTHROPIC_AUTH_TOKEN`` (a bearer token);
        without either claude answers "Not logged in". ``CLAUDE_CODE_USE_BEDROCK`` and
        ``CLAUDE_CODE_USE_VERTEX`` switch it to those clouds, which need their region (and
        Vertex its project) in the environment.
        """
        problems: list[str] = []
        if _on(env.get("CLAUDE_CODE_USE_BEDROCK")):
            if not (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")):
                problems.append(
                    "CLAUDE_CODE_USE_BEDROCK needs AWS_REGION in the worker's environment"
                )
            return env.get("ANTHROPIC_BEDROCK_BASE_URL"), problems
        if _on(env.get("CLAUDE_CODE_USE_VERTEX")):
            problems += [
                f"CLAUDE_CODE_USE_VERTEX needs {name} in the worker's environment"
                for name in ("CLOUD_ML_REGION", "ANTHROPIC_VERTEX_PROJECT_ID")
                if not env.get(name)
            ]
            return env.get("ANTHROPIC_VERTEX_BASE_URL"), problems
        base_url = env.get("ANTHROPIC_BASE_URL")
        if not base_url:
            return None, problems
        usable = is_http_url(base_url)
        if not usable:
            problems.append("ANTHROPIC_BASE_URL must be an http:// or https:// URL with a host")
        if not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")):
            problems.append(
                "ANTHROPIC_BASE_URL is set but neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN "
                "reaches the worker: claude would answer 'Not logged in'"
            )
        return base_url if usable else None, problems

    def settings_file(self) -> str:
        """The settings file's content, as the runner writes it for ``--settings``."""
        return json.dumps(SETTINGS, indent=2) + "\n"

    def login(
        self, executable: Path, runs: RunsAs, env: Mapping[str, str], run: RunCommand
    ) -> Login:
        """An API key or token in the worker environment, or the credentials file (in
        ``CLAUDE_CONFIG_DIR``, else ``~/.claude``): claude has no login status command."""
        secret = next((name for name in SECRETS if env.get(name)), None)
        if secret is not None:
            return Login(True, f"{secret} reaches the claude workers")
        config_dir = Path(env.get("CLAUDE_CONFIG_DIR") or runs.home / ".claude")
        credentials = config_dir / CREDENTIALS
        if credentials.is_file():
            return Login(True, f"credentials in {credentials}")
        fix = (
            f"as {runs.who()}: {runs.sudo('claude')}, then /login (or "
            f"{runs.sudo('claude setup-token')} and give the daemon CLAUDE_CODE_OAUTH_TOKEN, "
            "or ANTHROPIC_API_KEY: both reach claude workers)"
        )
        return Login(
            False,
            f"not logged in as {runs.who()}: no {', '.join(SECRETS)} in the worker "
            f"environment and no {credentials}",
            fix,
        )

    def speaks(self, event: dict[str, Any]) -> bool:
        # every claude event names its session; gemini's ``result`` does not
        return event.get("type") in ("system", "result", "assistant", "user") and (
            "session_id" in event or "uuid" in event
        )

    def describe(self, event: dict[str, Any]) -> str | None:
        """One event for people: messages part by part, tool calls to their target."""
        kind = event.get("type")
        if kind == "system":
            return _system_line(event)
        if kind == "result":
            return _result_line(event)
        message = event.get("message")
        if kind not in ("assistant", "user") or not isinstance(message, dict):
            return shortened(orjson.dumps(event).decode())
        parts = [
            _part(kind, part) for part in message.get("content") or [] if isinstance(part, dict)
        ]
        shown = [part for part in parts if part]
        return "\n".join(shown) if shown else None



def _blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of an event's message; none when it has none."""
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [block for block in content if isinstance(block, dict)] if isinstance(
        content, list
    ) else []


def _system_line(event: dict[str, Any]) -> str:
    """A ``system`` event for people: the session and model it began, or its subtype."""
    if event.get("subtype") == "init":
        return f"claude session {event.get('session_id')} ({event.get('model')})"
    return f"system {event.get('subtype')}"


def _result_line(event: dict[str, Any]) -> str:
    """The ``result`` event for people: done or failed, with its words."""
    verdict = "FAILED" if event.get("is_error") else "done"
    return f"result {verdict}: {shortened(event.get('result'))}"


def _part(kind: str, part: dict[str, Any]) -> str | None:
    what = part.get("type")
    if what == "text":
        return f"claude: {shortened(part.get('text'))}"
    if what == "thinking":
        return f"(thinking) {shortened(part.get('thinking'))}"
    if what == "tool_use":
        return _tool_use_line(part)
    if what == "tool_result":
        return _tool_result_line(part)
    return None if kind == "user" else f"{what}"


def _tool_use_line(part: dict[str, Any]) -> str:
    """A tool call for people: its tool and its command, file or pattern."""
    arguments = mapping(part.get("input"))
    target = arguments.get("command") or arguments.get("file_path") or arguments.get("pattern")
    return f"tool {part.get('name')}: {shortened(target or orjson.dumps(arguments).decode())}"


def _tool_result_line(part: dict[str, Any]) -> str:
    """A tool's result for people: its size, and whether it is an error."""
    content = part.get("content")
    size = len(content) if isinstance(content, str) else len(orjson.dumps(content))
    return f"  -> tool result ({size} chars){' ERROR' if part.get('is_error') else ''}"


ADAPTER = Claude()
