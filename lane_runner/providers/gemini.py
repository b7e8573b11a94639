"""Gemini CLI adapter: ``gemini -p "" --output-format stream-json`` argv and events.

Events (gemini-cli 0.61, checked against the pinned binary): ``init{session_id,
model}``; ``message{role, content, delta}`` (the assistant's text comes in pieces with
``delta: true``); ``tool_use{tool_name, tool_id, parameters}`` when a tool begins and
``tool_result{tool_id, status, output}`` when it ends; ``error{severity, message}``;
then one ``result{status, error?, stats}``, whose ``stats`` are this invocation's
tokens (``input_tokens`` with the ``cached`` ones in it, ``output_tokens`` without the
thinking, which is what ``total_tokens`` has beyond both) and no cost: the ledger
prices them from the ``prices`` table. Exit status 0 success, 1 an error, 41 no
usable login, 42 bad input (a taken or unknown session), 53 the turn limit.

The runner names the session (``--session-id``, then ``-r``). A spent quota ends
the run at once (``TerminalQuotaError``, "You have exhausted your daily quota"), its
wait said on stderr ("Please retry in 3h2m1s").

``GOOGLE_GEMINI_BASE_URL`` points it at a gateway. Given that variable and no auth
type in its settings, gemini 0.61 picks its ``gateway`` auth type, which its headless
mode then refuses ("Invalid auth method selected", exit 41): the worker's
``~/.gemini/settings.json`` must select ``gemini-api-key``, which takes the same base
URL (``doctor`` says so). The runner cannot select it for the worker: gemini reads a
system settings file only when it and every directory above it belong to root and
no one else may write them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lane_runner.providers import denied, resets, worker_files
from lane_runner.providers.adapter import Login, RunCommand, RunsAs, mapping, shortened
from lane_runner.providers.model import Classification, ProviderRequest
from lane_runner.providers.prompted import PromptedAnswer
from lane_runner.providers.reading import Reading, result_object
from lane_runner.providers.usage import Counted, LimitNotice, UsageReport, tokens
from lane_runner.urls import is_http_url

NO_ANSWER = (
    "gemini ended its turn without a final message holding the result object: the "
    "answer must be the last message, one JSON object in the result schema"
)
#: The runner's policy file in the worker's gemini home (``<home>/.gemini/policies``),
#: which gemini loads at every start at the user tier, above its yolo mode's allow-all.
POLICY_NAME = "lane-runner.toml"
#: What a worker pointed at a gateway needs in its gemini settings.
GATEWAY_AUTH = '{"security": {"auth": {"selectedType": "gemini-api-key"}}}'
#: Where gemini finds a login besides its OAuth file (``doctor``).
SECRETS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
SWITCHES = ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA")
OAUTH_FILE = "oauth_creds.json"
_LIMIT_WORDS = re.compile(r"quota|rate.?limit|\b429\b|resource.?exhausted", re.I)


def gemini_home(env: Mapping[str, str]) -> Path:
    """``<GEMINI_CLI_HOME, else HOME>/.gemini``: settings, sessions, logins, policies."""
    return Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or "/nonexistent") / ".gemini"


def policy_text() -> str:
    """The deny list (``denied.py``) as gemini policy rules: a shell command that begins
    with a denied prefix is refused whatever the approval mode."""
    rules = [
        f'[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = '
        f'{json.dumps(denied.spelled(command))}\ndecision = "deny"\npriority = 900\n'
        f"denyMessage = {json.dumps(denied.REASON)}\n"
        for command in denied.DENIED_COMMANDS
    ]
    return "# Written by lane-runner before every gemini start; edits are replaced.\n" + "\n".join(
        rules
    )


def limit_of(text: str, now: float, known: LimitNotice | None) -> LimitNotice | None:
    """A usage limit in gemini's words, with the wait it names; a wait already known
    stands where these words name none."""
    if not _LIMIT_WORDS.search(text):
        return None
    moment = resets.after_delay(text, now)
    if moment is None and known is not None:
        moment = known.resets_at
    return LimitNotice(text[:500], moment)


def usage_of(event: dict[str, Any], session_id: str | None) -> UsageReport | None:
    """``result.stats.models``: this invocation's tokens per model, once (keyed by the
    session and the result's moment): a resumed session reports only its own."""
    models = mapping(mapping(event.get("stats")).get("models"))
    spent: dict[str, dict[str, int]] = {}
    unknown: set[str] = set()
    for model, figures in models.items():
        if not isinstance(figures, dict):
            continue
        counts = _counts(figures)
        spent[str(model)] = counts.tokens
        unknown.update(counts.unknown)
    if not spent:
        return None
    key = f"{session_id}:{event.get('timestamp')}"
    return UsageReport("message", session_id, spent, key=key, unknown=tuple(sorted(unknown)))


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _counts(figures: dict[str, Any]) -> Counted:
    """One model's stats: ``input_tokens`` less the cached ones; the thinking (what
    ``total_tokens`` has beyond input and output) added to the output, as it is billed."""
    given, cached = _count(figures.get("input_tokens")), _count(figures.get("cached"))
    output, total = _count(figures.get("output_tokens")), _count(figures.get("total_tokens"))
    if given is None or cached is None or output is None or total is None:
        return tokens(input=figures.get("input_tokens"), cached_input=figures.get("cached"),
                      output=figures.get("output_tokens"))
    thinking = max(0, total - given - output)
    return tokens(input=max(0, given - cached), cached_input=cached, output=output + thinking,
                  reasoning=thinking)


def _init(reading: Reading, event: dict[str, Any]) -> bool:
    session_id = event.get("session_id")
    if isinstance(session_id, str) and session_id:
        reading.session_id = session_id
    return True


def _message(reading: Reading, event: dict[str, Any]) -> bool:
    if event.get("role") != "assistant":
        return True
    if not event.get("delta"):
        reading.said.clear()
    reading.said.append(str(event.get("content") or ""))
    return True


def _tool(reading: Reading, event: dict[str, Any]) -> bool:
    """A tool call: the text before it was not the final message."""
    reading.said.clear()
    return True


def _error(reading: Reading, event: dict[str, Any]) -> bool:
    if event.get("severity") == "warning":
        return False
    said = str(event.get("message") or "gemini error")
    reading.heard_error(said, limit_of(said, reading.clock(), reading.limit))
    return True


def _result(reading: Reading, event: dict[str, Any]) -> bool:
    reading.finished = True
    report = usage_of(event, reading.session_id)
    if report is not None:
        reading.usage.append(report)
    if event.get("status") != "success":
        said = str(mapping(event.get("error")).get("message") or f"gemini {event.get('status')}")
        reading.signals.result_is_error = True
        reading.heard_error(said, limit_of(said, reading.clock(), reading.limit))
        return True
    reading.candidate = result_object("".join(reading.said), reading.shape)
    if reading.candidate is None:
        reading.unanswered = NO_ANSWER
    return True


#: What each event does to a reading; True: meaningful progress.
HANDLERS: dict[str, Callable[[Reading, dict[str, Any]], bool]] = {
    "init": _init,
    "message": _message,
    "tool_use": _tool,
    "tool_result": _tool,
    "error": _error,
    "result": _result,
}


def _auth_type(env: Mapping[str, str]) -> str | None:
    """The auth type the worker's own settings select, if they do."""
    try:
        document = json.loads((gemini_home(env) / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    chosen = mapping(mapping(mapping(document).get("security")).get("auth")).get("selectedType")
    return chosen if isinstance(chosen, str) else None


class Gemini(PromptedAnswer):
    """``gemini -p "" --output-format stream-json``: the runner reserves the session id,
    the answer is asked for in the prompt (``prompted.py``), settings come from its
    environment and the worker's ``~/.gemini/settings.json``."""

    name = "gemini"
    command = "gemini"
    #: ``gemini --version`` says only the version ("0.61.0").
    version_identity = re.compile(r"^\d+\.\d+\.\d+(?:-[\w.]+)?\s*$", re.M)
    env_prefixes = ("GEMINI_", "GOOGLE_GEMINI_", "GOOGLE_GENAI_", "GOOGLE_API_KEY",
                    "GOOGLE_CLOUD_")
    model_prefix = "gemini-"
    default_models = {
        "low": "gemini-2.5-flash-lite",
        "medium": "gemini-2.5-flash",
        "high": "gemini-2.5-pro",
        "xhigh": "gemini-2.5-pro",
    }
    env_help = "variables set for gemini workers (GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL...)"
    denies_by = f"a policy file, <GEMINI_CLI_HOME>/.gemini/policies/{POLICY_NAME}"
    reserves_session = True
    #: "Session ID ... already exists" on a fresh start: resume it; "Invalid session
    #: identifier" on resume: start that reserved id fresh.
    session_fallbacks = {
        (False, Classification.SESSION_COLLISION): True,
        (True, Classification.SESSION_MISSING): False,
    }
    failure_texts = {
        Classification.SESSION_MISSING: (
            r"invalid session identifier|error resuming session: no previous sessions found",
        ),
        Classification.SESSION_COLLISION: (r'session id "[^"]*" already exists',),
        Classification.MISCONFIGURED: (
            r"^(?:unknown arguments?|not enough arguments|invalid values?):",  # yargs
            r"invalid auth method selected",
        ),
        Classification.AUTH: (
            r"please set an auth method|must specify the GEMINI_API_KEY",
            r"API key not valid",
        ),
        Classification.CAPACITY: (r"TerminalQuotaError",),
    }
    egress_hosts = ("generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com",
                    "oauth2.googleapis.com", "accounts.google.com")

    def argv(
        self, req: ProviderRequest, *, resume: bool, result_file: Path, schema: str
    ) -> list[str]:
        """The prompt comes on stdin (``-p ""`` is appended to it); ``--yolo`` approves what
        the policy file does not deny (nobody is there to); ``--skip-trust``: the
        workspace is the task's own."""
        return [
            str(req.executable), "-p", "", "--output-format", "stream-json", "-m", req.model,
            "--yolo", "--skip-trust", "-r" if resume else "--session-id", str(req.session_id),
        ]

    def prepare(self, req: ProviderRequest) -> None:
        """The deny list as a policy file in the worker's gemini home, written as the
        worker before every start: one removed or edited is put back."""
        path = gemini_home(req.env) / "policies" / POLICY_NAME
        worker_files.publish(path, policy_text().encode(), req.run_as)

    def writable_homes(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        return (gemini_home(env),)

    def settled_files(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """Its settings (hooks, MCP servers), policies, commands, extensions and memory."""
        home = gemini_home(env)
        names = ("settings.json", "policies", "commands", "extensions", "GEMINI.md", "agents")
        return tuple(home / name for name in names)

    def observe(self, reading: Reading, event: dict[str, Any]) -> bool:
        """Fold one event into ``reading``; True when it is meaningful progress."""
        handler = HANDLERS.get(str(event.get("type")))
        return handler(reading, event) if handler else False

    def observe_stderr(self, reading: Reading, line: str) -> None:
        """The quota's wait, which only the error report on stderr names."""
        if reading.limit is not None or _LIMIT_WORDS.search(line):
            reading.limit = limit_of(line, reading.clock(), reading.limit) or reading.limit

    def track_tools(self, tools: set[str], event: dict[str, Any]) -> None:
        kind, tool_id = event.get("type"), str(event.get("tool_id"))
        if kind == "tool_use":
            tools.add(tool_id)
        elif kind == "tool_result":
            tools.discard(tool_id)
        elif kind == "result":
            tools.clear()

    def gateway(
        self, settings: Mapping[str, Any], env: Mapping[str, str]
    ) -> tuple[str | None, list[str]]:
        """``GOOGLE_GEMINI_BASE_URL`` (None: Google's API), and what would stop gemini."""
        base_url = env.get("GOOGLE_GEMINI_BASE_URL")
        if not base_url:
            return None, []
        problems: list[str] = []
        if not is_http_url(base_url):
            problems.append("GOOGLE_GEMINI_BASE_URL must be an http:// or https:// URL with a host")
        if not env.get("GEMINI_API_KEY"):
            problems.append("GOOGLE_GEMINI_BASE_URL is set but GEMINI_API_KEY does not reach the "
                            "worker: gemini would refuse to start")
        chosen = _auth_type(env)
        if chosen != "gemini-api-key":
            problems.append(
                f"gemini 0.61 refuses GOOGLE_GEMINI_BASE_URL headless unless the worker's "
                f"{gemini_home(env) / 'settings.json'} selects the API-key auth (it selects "
                f"{chosen!r}): put {GATEWAY_AUTH} in it"
            )
        return (base_url if is_http_url(base_url) else None), problems

    def login(
        self, executable: Path, runs: RunsAs, env: Mapping[str, str], run: RunCommand
    ) -> Login:
        """A key or a cloud switch in the worker environment, or gemini's OAuth file:
        gemini has no login status command."""
        found = next((name for name in (*SECRETS, *SWITCHES) if env.get(name)), None)
        if found is not None:
            return Login(True, f"{found} reaches the gemini workers")
        credentials = gemini_home({**env, "HOME": env.get("HOME") or str(runs.home)}) / OAUTH_FILE
        if credentials.is_file():
            return Login(True, f"credentials in {credentials}")
        fix = (f"as {runs.who()}: {runs.sudo('gemini')} and log in with Google, or give the "
               "daemon GEMINI_API_KEY (it reaches gemini workers)")
        return Login(False, f"not logged in as {runs.who()}: no {', '.join(SECRETS)} in the "
                     f"worker environment and no {credentials}", fix)

    def speaks(self, event: dict[str, Any]) -> bool:
        return event.get("type") in HANDLERS and isinstance(event.get("timestamp"), str)

    def describe(self, event: dict[str, Any]) -> str | None:
        """One event for people: tool calls to their command, the result's verdict."""
        kind = event.get("type")
        if kind == "init":
            return f"gemini session {event.get('session_id')} ({event.get('model')})"
        if kind == "tool_use":
            arguments = mapping(event.get("parameters"))
            target = arguments.get("command") or arguments.get("file_path")
            return f"tool {event.get('tool_name')}: {shortened(target or json.dumps(arguments))}"
        if kind == "tool_result":
            return f"  -> tool {event.get('status')}"
        if kind == "error":
            return f"error: {shortened(event.get('message'))}"
        if kind == "result":
            said = mapping(event.get("error")).get("message") or ""
            return f"result {event.get('status')}: {shortened(said)}".rstrip(": ")
        if kind == "message" and event.get("role") == "assistant" and not event.get("delta"):
            return f"gemini: {shortened(event.get('content'))}"
        return None


ADAPTER = Gemini()
