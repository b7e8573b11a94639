"""opencode adapter: ``opencode run --format json`` argv and its event stream.

Events (opencode 1.18, checked against the pinned binary): one JSON object a line,
``{type, timestamp, sessionID, part}``. ``step_start`` opens a model step; ``text``
carries a finished text part; ``tool_use`` a tool call once it has *ended*
(``part.state.status`` ``completed`` or ``error``: nothing is printed when a tool
begins); ``step_finish`` closes the step with ``part.reason`` (``tool-calls`` while
the model goes on, ``stop`` at its last word), ``part.tokens`` and ``part.cost``;
``error`` carries ``error.data.message``. There is no terminal event: the last
``step_finish`` whose reason is not a tool call ends the answer.

What the stream does not say, stderr does (``--print-logs --log-level ERROR``): an API
that fails (an exhausted quota, a 429) is retried for ever with nothing on stdout, and
only a ``message="stream error"`` log line names why. ``observe_stderr`` reads those
lines, so such a hang is a capacity problem (another provider can take the task), not
a stall the task is blamed for.

Models are ``<provider>/<model>`` to opencode; a lane-runner model name has no ``/``
(it could make a path), so it is written ``<provider>:<model>`` and the first ``:``
becomes the ``/`` on the command line.
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
from lane_runner.providers.usage import LimitNotice, UsageReport, tokens

#: Why a finished answer without a result object is no answer.
NO_ANSWER = (
    "opencode ended its turn without a final message holding the result object: the "
    "answer must be the last message, one JSON object in the result schema"
)
#: What opencode writes into its configuration folder at a start where it is missing
#: (its own text). That folder is read-only in a sandbox (``settled_files``), and once
#: anything made it (``opencode --version`` does) a start that cannot write this fails
#: with "Unexpected error": so the runner writes it first, as the worker.
CONFIG_GITIGNORE = b"node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"
#: ``step_finish`` reasons that mean the model called a tool and goes on.
TOOL_STEPS = frozenset({"tool-calls", "tool_calls"})
#: opencode's ``--variant`` per lane effort (the provider's reasoning effort; a model
#: without variants ignores it); ``low`` and ``medium`` run the model's default.
VARIANTS = {"high": "high", "xhigh": "max"}
#: The log line opencode prints while it retries a failing model API.
_STREAM_ERROR = re.compile(r'message="?stream error"?.*?error\.error="?(?P<said>[^"]*)"?', re.I)
_LIMIT_WORDS = re.compile(r"quota|usage limit|rate.?limit|\b429\b|credit balance", re.I)


def cli_model(model: str) -> str:
    """A lane-runner model name (``provider:model``) as opencode's ``provider/model``."""
    provider, colon, name = model.partition(":")
    return f"{provider}/{name}" if colon else model


def permission() -> str:
    """``OPENCODE_PERMISSION``: the deny list (``denied.py``) as bash permission patterns,
    which opencode enforces before ``--auto`` approves anything else."""
    rules: dict[str, str] = {f"{denied.spelled(command)}*": "deny"
                             for command in denied.DENIED_COMMANDS}
    return json.dumps({"bash": {"*": "allow", **rules}})


def limit_of(text: str, now: float) -> LimitNotice | None:
    """A usage limit in the words a model API gave opencode, with the wait it names."""
    if not _LIMIT_WORDS.search(text):
        return None
    return LimitNotice(text[:500], resets.after_delay(text, now))


def usage_of(part: dict[str, Any], session_id: str | None, model: str) -> UsageReport | None:
    """One step's usage: opencode's ``input`` leaves out the cache reads and writes and its
    ``output`` the reasoning, which the ledger counts as part of the output. A cost is the
    CLI's own only when it priced the model (a custom provider's is 0: the price table)."""
    figures, key = part.get("tokens"), part.get("id")
    if not isinstance(figures, dict) or not isinstance(key, str):
        return None
    cache = mapping(figures.get("cache"))
    output, reasoning = figures.get("output"), figures.get("reasoning")
    if isinstance(output, int) and isinstance(reasoning, int):
        output += reasoning
    counts = tokens(input=figures.get("input"), cached_input=cache.get("read"),
                    cache_write=cache.get("write"), output=output, reasoning=reasoning)
    cost = part.get("cost")
    priced = isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0
    costs = {model: float(cost)} if priced and cost is not None else {}
    return UsageReport("message", session_id, {model: counts.tokens}, costs, key=key,
                       unknown=counts.unknown)


def _step_started(reading: Reading, event: dict[str, Any]) -> bool:
    return True


def _text(reading: Reading, event: dict[str, Any]) -> bool:
    """The latest text is the answer if the step it is in is the last."""
    reading.candidate = result_object(mapping(event.get("part")).get("text"), reading.shape)
    return True


def _tool_used(reading: Reading, event: dict[str, Any]) -> bool:
    return True  # the tool's own failure is the agent's business, not the CLI's


def _step_finished(reading: Reading, event: dict[str, Any]) -> bool:
    part = mapping(event.get("part"))
    report = usage_of(part, reading.session_id, reading.model)
    if report is not None:
        reading.usage.append(report)
    if part.get("reason") in TOOL_STEPS:
        return True
    reading.finished = True
    if reading.candidate is None:
        reading.unanswered = NO_ANSWER
    return True


def _error(reading: Reading, event: dict[str, Any]) -> bool:
    error = mapping(event.get("error"))
    data = mapping(error.get("data"))
    said = str(data.get("message") or error.get("name") or "opencode error")
    reading.heard_error(said, limit_of(said, reading.clock()))
    return True


#: What each event does to a reading; True: meaningful progress.
HANDLERS: dict[str, Callable[[Reading, dict[str, Any]], bool]] = {
    "step_start": _step_started,
    "text": _text,
    "tool_use": _tool_used,
    "step_finish": _step_finished,
    "error": _error,
}


def _describe_tool(part: dict[str, Any]) -> str:
    state = mapping(part.get("state"))
    arguments = mapping(state.get("input"))
    target = arguments.get("command") or arguments.get("filePath") or arguments.get("pattern")
    failed = " ERROR" if state.get("status") == "error" else ""
    return f"tool {part.get('tool')}: {shortened(target or json.dumps(arguments))}{failed}"


class Opencode(PromptedAnswer):
    """``opencode run --format json``: opencode names its session; the answer is asked
    for in the prompt (``prompted.py``); settings come from its environment
    (``OPENCODE_CONFIG_CONTENT``, its ``opencode.json``)."""

    name = "opencode"
    command = "opencode"
    #: ``opencode --version`` says only the version ("1.18.33").
    version_identity = re.compile(r"^\d+\.\d+\.\d+(?:-[\w.]+)?\s*$", re.M)
    env_prefixes = ("OPENCODE_",)
    #: Any vendor's model, through opencode's providers.
    model_prefix = ""
    default_models = {
        "low": "opencode:claude-haiku-4-5",
        "medium": "opencode:claude-sonnet-4-5",
        "high": "opencode:claude-sonnet-4-5",
        "xhigh": "opencode:claude-opus-4-5",
    }
    env_help = (
        "variables set for opencode workers (OPENCODE_CONFIG_CONTENT for a custom provider, "
        "the provider's key)"
    )
    denies_by = "OPENCODE_PERMISSION (bash patterns denied before --auto approves)"
    #: "Session not found" on resume: start fresh (opencode names the new session).
    session_fallbacks = {(True, Classification.SESSION_MISSING): False}
    failure_texts = {
        Classification.SESSION_MISSING: (r"session not found",),
        Classification.MISCONFIGURED: (
            r"ProviderModelNotFoundError|model not found: ",
            # yargs answers an unknown option with the command's usage alone
            r"^opencode run \[message\.\.\]|^(?:unknown arguments?|invalid values?):",
        ),
        Classification.AUTH: (r"ProviderAuthError|api key is missing",),
    }
    #: Its own log line while it retries an API whose quota is spent: it never gives up.
    gave_up_texts = (r"^opencode stream error: .*(?:quota|billing|credit balance)",)
    #: OpenCode Zen and its model list (``models.opencode.ai``, once ``models.dev``); a
    #: provider's own API is the gateway.
    egress_hosts = ("opencode.ai", "models.opencode.ai", "models.dev")

    def argv(
        self, req: ProviderRequest, *, resume: bool, result_file: Path, schema: str
    ) -> list[str]:
        """The prompt comes on stdin; ``--title`` spares a model call for a session title,
        ``--auto`` approves what the deny list does not refuse (nobody is there to)."""
        variant = VARIANTS.get(req.effort)
        return [
            str(req.executable), "run", "--format", "json", "--print-logs", "--log-level",
            "ERROR", "--auto", "--title", "lane-runner", "-m", cli_model(req.model),
            *(["--variant", variant] if variant else []),
            *(["--session", str(req.session_id)] if resume else []),
        ]

    def run_env(self, req: ProviderRequest) -> dict[str, str]:
        return {"OPENCODE_PERMISSION": permission(), "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_SHARE": "1"}

    def writable_homes(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """Its data (sessions, logins) and state under the XDG homes."""
        home = Path(env.get("HOME") or "/nonexistent")
        data = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
        state = Path(env.get("XDG_STATE_HOME") or home / ".local" / "state")
        cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
        return data / "opencode", state / "opencode", cache / "opencode"

    def settled_files(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """Its configuration (providers, permissions, plugins, agents)."""
        home = Path(env.get("HOME") or "/nonexistent")
        return (Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode",)

    def prepare(self, req: ProviderRequest) -> None:
        """The ``.gitignore`` opencode insists on writing, where it is missing."""
        (config,) = self.settled_files(req.env)
        worker_files.publish(config / ".gitignore", CONFIG_GITIGNORE, req.run_as, replace=False)

    def observe(self, reading: Reading, event: dict[str, Any]) -> bool:
        """Fold one event into ``reading``; True when it is meaningful progress."""
        session_id = event.get("sessionID")
        if isinstance(session_id, str) and session_id:
            reading.session_id = session_id  # every event names it: a fresh one replaces

        handler = HANDLERS.get(str(event.get("type")))
        return handler(reading, event) if handler else False

    def observe_stderr(self, reading: Reading, line: str) -> None:
        """A ``stream error`` log line: the API failing while opencode retries, silent."""
        found = _STREAM_ERROR.search(line)
        if found is None:
            return
        said = found["said"] or "stream error"
        reading.heard_error(f"opencode stream error: {said}", limit_of(said, reading.clock()))

    def track_tools(self, tools: set[str], event: dict[str, Any]) -> None:
        """A step that has begun and not finished: the model is answering or one of its
        tools runs (opencode says nothing of a tool until it has ended). A step begins
        once the API answers, so a request that hangs is not in flight."""
        kind, part = event.get("type"), mapping(event.get("part"))
        step = str(part.get("messageID"))
        if kind == "step_start":
            tools.add(step)
        elif kind == "step_finish":
            tools.discard(step)
        elif kind == "error":
            tools.clear()

    def login(
        self, executable: Path, runs: RunsAs, env: Mapping[str, str], run: RunCommand
    ) -> Login:
        """``opencode auth list``: its stored credentials and the keys its environment has;
        a custom provider in ``OPENCODE_CONFIG_CONTENT`` brings its own."""
        if '"provider"' in env.get("OPENCODE_CONFIG_CONTENT", ""):
            return Login(True, "OPENCODE_CONFIG_CONTENT defines the provider opencode uses")
        said, status = run([str(executable), "auth", "list"])
        plain = re.sub(r"\x1b\[[0-9;]*m", "", said)
        stored = re.search(r"(\d+) credentials?", plain)
        if status == 0 and ((stored and int(stored[1]) > 0) or "Environment" in plain):
            return Login(True, " ".join(plain.split())[:200])
        fix = f"as {runs.who()}: {runs.sudo('opencode auth login')} (or give the provider's "
        fix += "key through opencode_env)"
        return Login(False, f"not logged in as {runs.who()}: opencode auth list said: "
                     f"{' '.join(plain.split())[:200]}", fix)

    def speaks(self, event: dict[str, Any]) -> bool:
        return event.get("type") in HANDLERS and "sessionID" in event

    def describe(self, event: dict[str, Any]) -> str | None:
        """One event for people: tool calls to their target, texts shortened."""
        kind, part = event.get("type"), mapping(event.get("part"))
        if kind == "text":
            return f"opencode: {shortened(part.get('text'))}"
        if kind == "tool_use":
            return _describe_tool(part)
        if kind == "step_finish":
            figures = mapping(part.get("tokens"))
            return (f"step {part.get('reason')} (tokens in {figures.get('input')}, "
                    f"out {figures.get('output')})")
        if kind == "error":
            said = mapping(mapping(event.get("error")).get("data")).get("message")
            return f"error: {shortened(said)}"
        return None


ADAPTER = Opencode()
