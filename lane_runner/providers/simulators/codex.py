"""Simulated ``codex`` (codex-cli 0.171 shaped) for demos, tests and benchmarks.

Accepts the argv lane-runner uses (``[--dangerously-bypass-approvals-and-sandbox]
[--dangerously-bypass-hook-trust] exec [resume] --json -m -c --output-schema -o [-C]
[THREAD] [PROMPT|-]``) and rejects anything else the way clap does (exit 2).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lane_runner.providers.simulators import play

_VALUED = {
    "-m": "model", "--model": "model", "-c": "config", "--config": "config",
    "--output-schema": "output_schema", "-o": "output", "--output-last-message": "output",
    "-C": "cd", "--cd": "cd", "-p": "profile", "--profile": "profile",
    "-s": "sandbox", "--sandbox": "sandbox",
}
_FLAGS = {
    "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
    "--ephemeral", "--dangerously-bypass-hook-trust",
}
_TOP_LEVEL_FLAGS = {"--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust"}
_EXEC_USAGE = "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]"
_RESUME_USAGE = "Usage: codex exec resume [OPTIONS] [SESSION_ID] [PROMPT]"


@dataclass
class Invocation:
    options: dict[str, list[str]] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    resume: bool = False
    positionals: list[str] = field(default_factory=list)


def _usage_error(message: str, usage: str) -> None:
    play.fail(f"error: {message}\n\n{usage}\n\nFor more information, try '--help'.", 2)


def parse(argv: list[str]) -> Invocation:
    invocation = Invocation()
    args = list(argv)
    _take_command(invocation, args)
    usage = _RESUME_USAGE if invocation.resume else _EXEC_USAGE
    while args:
        _take(invocation, args.pop(0), args, usage)
    limit = 2 if invocation.resume else 1
    if len(invocation.positionals) > limit:
        _usage_error(f"unexpected argument '{invocation.positionals[limit]}' found", usage)
    return invocation


def _take_command(invocation: Invocation, args: list[str]) -> None:
    """The top-level flags, then ``exec`` (or ``e``) and an optional ``resume``, taken
    from the front of ``args``."""
    while args and args[0] in _TOP_LEVEL_FLAGS:
        invocation.flags.add(args.pop(0))
    if not args or args.pop(0) not in ("exec", "e"):
        play.fail("simulated codex supports only `codex exec`", 2)
    if args and args[0] == "resume":
        invocation.resume = True
        args.pop(0)


def _take(invocation: Invocation, arg: str, args: list[str], usage: str) -> None:
    """One argument of ``exec`` into ``invocation``, with the value it takes from ``args``
    (``exec resume`` has no ``--cd``)."""
    name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
    if arg == "-" or not arg.startswith("-"):
        invocation.positionals.append(arg)
    elif name in _VALUED and not (invocation.resume and _VALUED[name] == "cd"):
        _take_value(invocation, name, inline if eq else None, args, usage)
    elif arg in _FLAGS:
        invocation.flags.add(arg)
    else:
        _usage_error(f"unexpected argument '{arg}' found\n\n"
                     f"  tip: to pass '{arg}' as a value, use '-- {arg}'", usage)


def _take_value(
    invocation: Invocation, name: str, inline: str | None, args: list[str], usage: str
) -> None:
    """An option's value: written after ``=`` (``inline``), else the next argument."""
    if inline is None and not args:
        _usage_error(f"a value is required for '{name} <VALUE>' but none was supplied", usage)
    value = inline if inline is not None else args.pop(0)
    invocation.options.setdefault(_VALUED[name], []).append(value)


def _item(kind: str, number: int, **fields: object) -> dict[str, object]:
    return {"id": f"item_{number}", "type": kind, **fields}


class Run:
    def __init__(self, invocation: Invocation) -> None:
        self.invocation = invocation
        self.sessions = play.Sessions(play.home("CODEX_HOME", ".codex-sim"))
        positionals = list(invocation.positionals)
        self.thread_id = positionals.pop(0) if invocation.resume and positionals else None
        prompt_arg = positionals[0] if positionals else "-"
        self.said = sys.stdin.read() if prompt_arg == "-" else prompt_arg
        self.prompt = self.sessions.heard(self.thread_id, self.said)
        self.scenario = play.choose("codex", self.prompt)
        workspace = invocation.options.get("cd", [os.getcwd()])[-1]
        self.workspace = Path(workspace)
        self.items = 0

    def item(self, kind: str, **fields: object) -> None:
        self.items += 1
        play.emit({"type": "item.completed", "item": _item(kind, self.items, **fields)})
        play.pause()

    def fail_turn(self, message: str) -> None:
        play.emit({"type": "error", "message": message})
        play.emit({"type": "turn.failed", "error": {"message": message}})
        sys.exit(1)

    def start(self) -> str:
        if self.thread_id is not None:
            if self.scenario.name == "session-missing":
                self.sessions.forget(self.thread_id)
            if not self.sessions.exists(self.thread_id):
                play.fail("Error: thread/resume: thread/resume failed: no rollout found for "
                          f"thread id {self.thread_id} (code -32600)")
            thread_id = self.thread_id
        else:
            thread_id = str(uuid.uuid4())
        play.emit({"type": "thread.started", "thread_id": thread_id})
        play.emit({"type": "turn.started"})
        return thread_id

    def play(self) -> None:
        thread_id = self.start()
        name = self.scenario.name
        turn = self.sessions.next_turn(thread_id, self.said)
        self.item("reasoning", text="**Reading the task**")
        play.wait_at_gate()
        if name == "capacity":
            self.fail_turn(play.codex_limit_text(self.scenario))
        if name == "auth":
            self.fail_turn("unexpected status 401 Unauthorized: Missing bearer or basic "
                           "authentication in header")
        if name == "hang":
            play.hang()
        if name == "reconnect-forever":
            self.reconnect_forever()
        if name == "crash":
            play.fail("thread 'main' panicked at core/src/codex.rs:412:9:\n"
                      "simulated crash\nnote: run with `RUST_BACKTRACE=1`", 101)
        if name == "silent-tool":
            self.items += 1
            tool = _item("command_execution", self.items, command="make test",
                         aggregated_output="", exit_code=None, status="in_progress")
            play.emit({"type": "item.started", "item": tool})
            play.silent_tool(self.scenario)
            play.emit({"type": "item.completed",
                       "item": {**tool, "status": "completed", "exit_code": 0}})
        if name == "grandchildren":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            pids = play.spawn_stubborn_descendants()
            self.item("command_execution", command="sleep 3600", status="in_progress",
                      aggregated_output=f"pids: {' '.join(map(str, pids))}", exit_code=None)
            play.hang()
        self.work()
        schemas = self.invocation.options.get("output_schema", [])
        if schemas and play.reviews(Path(schemas[-1]).read_text(encoding="utf-8")):
            result = play.review(self.scenario, self.workspace)
        else:
            result = play.answer(self.scenario, turn, self.prompt, self.workspace)
        text = json.dumps(result)
        for path in self.invocation.options.get("output", []):
            Path(path).write_text(text)
        self.item("agent_message", text=text)
        # codex's usage is the thread's running total: 1,200 in and 80 out per turn here
        play.emit({"type": "turn.completed", "usage": {
            "input_tokens": 1200 * turn, "cached_input_tokens": 0, "output_tokens": 80 * turn}})
        play.linger_if(self.scenario)

    def work(self) -> None:
        name = self.scenario.name
        if name == "garbage":
            sys.stdout.write("not json at all\n{\"type\": \"item.completed\", broken\n\x00\x01\n")
        if name == "huge":
            self.huge(int(self.scenario.number(1 << 20)))
        if name == "slow":
            interval, count = self.scenario.number(1.0), int(self.scenario.number(5, 1))
            for step in range(count):
                time.sleep(interval)
                self.item("reasoning", text=f"**still working ({step + 1}/{count})**")
        self.item("command_execution", command="git status --short", status="completed",
                  aggregated_output="", exit_code=0)

    def huge(self, size: int) -> None:
        chunk = "x" * 65536
        for _ in range(max(1, size // len(chunk))):
            self.items += 1
            sys.stdout.write(json.dumps({"type": "item.completed", "item": _item(
                "command_execution", self.items, command="cat big", aggregated_output=chunk,
                exit_code=0, status="completed")}) + "\n")
        sys.stdout.flush()

    def reconnect_forever(self) -> None:
        attempt = 0
        while True:
            attempt += 1
            detail = "stream disconnected before completion: failed to lookup address information"
            message = (f"Reconnecting... {attempt}/5 ({detail})" if attempt <= 5
                       else "Reconnecting... waiting for network (Connection failed)")
            play.emit({"type": "error", "message": message})
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    args = play.arguments(argv, "codex-cli 0.0.0 (simulated)")
    if args is None:
        return
    Run(parse(args)).play()


if __name__ == "__main__":
    main()
