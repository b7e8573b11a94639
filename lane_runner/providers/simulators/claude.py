"""Simulated ``claude`` (Claude Code 2.1 shaped) for demos, tests and benchmarks.

Accepts the argv lane-runner uses (``-p --output-format stream-json --verbose
--json-schema --model --effort --dangerously-skip-permissions --autocompact
--settings --disallowedTools ... --session-id|--resume ID``) and rejects anything
else the way commander does (``error: unknown option``, exit 1). As root it refuses
``--dangerously-skip-permissions`` as the real one does, unless ``IS_SANDBOX=1`` (or
``CLAUDE_CODE_BUBBLEWRAP=1``) says it is in a sandbox.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lane_runner.providers.simulators import play

_VALUED = {
    "--output-format": "output_format", "--json-schema": "json_schema", "--model": "model",
    "--effort": "effort", "--session-id": "session_id", "--settings": "settings",
    "--autocompact": "autocompact",
}
_VARIADIC = {"--disallowedTools", "--disallowed-tools", "--allowedTools", "--allowed-tools"}
_OPTIONAL = {"-r": "resume", "--resume": "resume"}
_FLAGS = {"-p": "print", "--print": "print", "--verbose": "verbose",
          "--dangerously-skip-permissions": "skip_permissions"}
_CHOICES = {
    "output_format": ("text", "json", "stream-json"),
    "effort": ("low", "medium", "high", "xhigh", "max"),
}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


@dataclass
class Invocation:
    options: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    denied: list[str] = field(default_factory=list)
    prompt: str | None = None


def parse(argv: list[str]) -> Invocation:
    invocation = Invocation()
    args = list(argv)
    while args:
        _take(invocation, args.pop(0), args)
    _check_choices(invocation)
    return invocation


def _take(invocation: Invocation, arg: str, args: list[str]) -> None:
    """One argument into ``invocation``, with the values it takes from ``args``."""
    name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
    if name in _VALUED:
        if not eq and not _next_is_value(args):
            play.fail(f"error: option '{name} <value>' argument missing")
        invocation.options[_VALUED[name]] = inline if eq else args.pop(0)
    elif name in _VARIADIC:
        while _next_is_value(args):
            invocation.denied.append(args.pop(0))
    elif name in _OPTIONAL:
        takes_next = not eq and _next_is_value(args)
        invocation.options[_OPTIONAL[name]] = args.pop(0) if takes_next else inline
    elif arg in _FLAGS:
        invocation.flags.add(_FLAGS[arg])
    else:
        _take_other(invocation, arg)


def _next_is_value(args: list[str]) -> bool:
    """Whether the next argument is a value (not an option) the current option may take."""
    return bool(args) and not args[0].startswith("-")


def _take_other(invocation: Invocation, arg: str) -> None:
    """An argument no option names: an unknown option, the prompt, or one too many."""
    if arg.startswith("-") and arg != "-":
        play.fail(f"error: unknown option '{arg}'")
    elif invocation.prompt is None:
        invocation.prompt = arg
    else:
        play.fail("error: too many arguments. Expected 1 argument but got 2.")


def _check_choices(invocation: Invocation) -> None:
    """Commander's refusal of a value outside an option's choices."""
    for key, allowed in _CHOICES.items():
        value = invocation.options.get(key)
        if value is not None and value not in allowed:
            choices = ", ".join(allowed)
            play.fail(f"error: option '--{key.replace('_', '-')} <value>' argument '{value}' "
                      f"is invalid. Allowed choices are {choices}.")


def _check(invocation: Invocation) -> None:
    """The run-time checks the real CLI makes after parsing."""
    options = invocation.options
    if "print" not in invocation.flags:
        play.fail("simulated claude supports only -p/--print")
    if options.get("output_format") == "stream-json" and "verbose" not in invocation.flags:
        play.fail("Error: When using --print, --output-format=stream-json requires --verbose")
    if "session_id" in options and not _UUID.match(options["session_id"]):
        play.fail("Error: Invalid session ID. Must be a valid UUID.")
    if "json_schema" in options:
        _check_schema(options["json_schema"])
    settings = options.get("settings", "{")
    if not settings.lstrip().startswith("{") and not Path(settings).is_file():
        play.fail(f"Error: Settings file not found: {settings}")
    if "skip_permissions" in invocation.flags and _root_outside_a_sandbox():
        play.fail("--dangerously-skip-permissions cannot be used with root/sudo privileges "
                  "for security reasons")


def _root_outside_a_sandbox() -> bool:
    """Root, with nothing saying it is in a sandbox (``IS_SANDBOX=1`` or
    ``CLAUDE_CODE_BUBBLEWRAP=1``): where the real CLI refuses to skip permissions."""
    return (os.geteuid() == 0 and os.environ.get("IS_SANDBOX") != "1"
            and os.environ.get("CLAUDE_CODE_BUBBLEWRAP") != "1")


def _check_schema(text: str) -> None:
    """The two refusals of Claude Code 2.1.332's draft-07 validator a runner can hit."""
    try:
        schema = json.loads(text)
    except ValueError as error:
        play.fail(f"Error: --json-schema is not valid JSON: {error}")
    meta = schema.get("$schema") if isinstance(schema, dict) else None
    if isinstance(meta, str) and "draft-07" not in meta:
        play.fail("Error: --json-schema is not a valid JSON Schema: "
                  f'no schema with key or ref "{meta}"')


class Run:
    def __init__(self, invocation: Invocation) -> None:
        self.options = invocation.options
        self.sessions = play.Sessions(play.home("CLAUDE_CONFIG_DIR", ".claude-sim"))
        self.said = invocation.prompt if invocation.prompt is not None else sys.stdin.read()
        self.prompt = self.sessions.heard(self.options.get("resume"), self.said)
        self.scenario = play.choose("claude", self.prompt)
        self.model = self.options.get("model", "claude-sonnet-4-5")

    def event(self, kind: str, session_id: str, **fields: Any) -> None:
        play.emit({"type": kind, **fields, "session_id": session_id, "uuid": str(uuid.uuid4())})
        play.pause()

    def result(self, session_id: str, *, is_error: bool, text: str, status: int = 0,
               structured: dict[str, Any] | None = None, subtype: str = "success") -> None:
        fields: dict[str, Any] = {"subtype": subtype, "is_error": is_error, "num_turns": 1,
                                  "result": text, "total_cost_usd": 0}
        if structured is not None:
            fields["structured_output"] = structured
        self.event("result", session_id, **fields)
        play.linger_if(self.scenario)
        sys.exit(status)

    def assistant(self, session_id: str, text: str, **fields: Any) -> None:
        """One response, with its usage as claude streams it (900 in, 60 out here)."""
        self.event("assistant", session_id, message={
            "id": f"msg_{uuid.uuid4().hex[:24]}", "role": "assistant", "model": self.model,
            "usage": {"input_tokens": 900, "output_tokens": 60},
            "content": [{"type": "text", "text": text}]}, parent_tool_use_id=None, **fields)

    def session(self) -> str:
        resume = self.options.get("resume")
        if resume is not None:
            if self.scenario.name == "session-missing":
                self.sessions.forget(resume)
            if not self.sessions.exists(resume):
                sys.stderr.write(f"No conversation found with session ID: {resume}\n")
                self.result(resume, is_error=True, text="", status=1,
                            subtype="error_during_execution")
            return resume
        session_id = self.options.get("session_id") or str(uuid.uuid4())
        if self.sessions.exists(session_id):
            play.fail(f"Error: Session ID {session_id} is already in use.")
        return session_id

    def play(self) -> None:
        session_id = self.session()
        turn = self.sessions.next_turn(session_id, self.said)
        name = self.scenario.name
        self.event("system", session_id, subtype="init", cwd=os.getcwd(), model=self.model,
                   permissionMode="bypassPermissions", tools=["Bash", "Edit", "Read", "Write"])
        play.wait_at_gate()
        if name == "auth":
            self.assistant(session_id, "Not logged in · Please run /login",
                           error="authentication_failed")
            self.result(session_id, is_error=True, text="Not logged in · Please run /login",
                        status=1)
        if name == "capacity":
            resets = play.resets_at(self.scenario)
            if resets is not None:
                self.event("rate_limit_event", session_id, rate_limit_info={
                    "status": "rejected", "resetsAt": int(resets),
                    "rateLimitType": "five_hour", "isUsingOverage": False})
            text = play.claude_limit_text(resets)
            self.assistant(session_id, text, error="rate_limit")
            self.result(session_id, is_error=True, text=text, status=1)
        if name == "hang":
            play.hang()
        if name == "reconnect-forever":
            self.retry_forever(session_id)
        if name == "crash":
            play.fail("TypeError: Cannot read properties of undefined (reading 'content')\n"
                      "    at simulated (file:///cli.js:1:1)")
        if name == "silent-tool":
            tool_id = f"toolu_{uuid.uuid4().hex[:12]}"
            self.event("assistant", session_id, message={
                "role": "assistant", "model": self.model, "content": [
                    {"type": "tool_use", "id": tool_id, "name": "Bash",
                     "input": {"command": "make test"}}]}, parent_tool_use_id=None)
            play.silent_tool(self.scenario)
            self.tool_result(session_id, "ok", tool_id)
        if name == "grandchildren":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            pids = play.spawn_stubborn_descendants()
            self.tool_result(session_id, f"pids: {' '.join(map(str, pids))}")
            play.hang()
        self.work(session_id)
        if play.reviews(self.options.get("json_schema", "")):
            structured = play.review(self.scenario, Path.cwd())
        else:
            structured = play.answer(self.scenario, turn, self.prompt, Path.cwd())
        self.assistant(session_id, json.dumps(structured))
        self.result(session_id, is_error=False, text=json.dumps(structured),
                    structured=structured)

    def tool_result(self, session_id: str, content: str, tool_id: str | None = None) -> None:
        tool_id = tool_id or f"toolu_{uuid.uuid4().hex[:12]}"
        self.event("user", session_id, message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": content}]},
            parent_tool_use_id=None)

    def work(self, session_id: str) -> None:
        name = self.scenario.name
        if name == "garbage":
            sys.stdout.write("not json at all\n{\"type\": \"assistant\", broken\n\x00\x01\n")
        if name == "huge":
            chunk = "x" * 65536
            for _ in range(max(1, int(self.scenario.number(1 << 20)) // len(chunk))):
                sys.stdout.write(json.dumps({"type": "user", "session_id": session_id,
                    "message": {"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": "toolu_big", "content": chunk}]}}) + "\n")
            sys.stdout.flush()
        if name == "slow":
            interval, count = self.scenario.number(1.0), int(self.scenario.number(5, 1))
            for step in range(count):
                time.sleep(interval)
                self.assistant(session_id, f"still working ({step + 1}/{count})")
        self.tool_result(session_id, "")

    def retry_forever(self, session_id: str) -> None:
        attempt = 0
        while True:
            attempt += 1
            self.event("system", session_id, subtype="api_retry", attempt=attempt,
                       max_retries=10, retry_delay_ms=50, error_status=None,
                       error="connection_error")
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    args = play.arguments(argv, "2.1.0 (Claude Code) simulated")
    if args is None:
        return
    invocation = parse(args)
    _check(invocation)
    Run(invocation).play()


if __name__ == "__main__":
    main()
