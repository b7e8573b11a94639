"""Simulated ``gemini`` (gemini-cli 0.61 shaped) for demos, tests and benchmarks.

Accepts the argv lane-runner uses (``-p "" --output-format stream-json -m MODEL --yolo
--skip-trust --session-id UUID|-r UUID``, the prompt on stdin) and answers anything
else as yargs does ("Unknown argument: x", exit 1). A taken or unknown session is
refused with gemini's words and exit 42; a spent quota ends the run at once
(``result`` status ``error``, exit 1) with its wait on stderr. ``prose`` answers in
words first and in the schema on the repair turn (``providers/prompted.py``).
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lane_runner.providers.simulators import play

_VALUED = {"-p": "prompt", "--prompt": "prompt", "-o": "output_format",
           "--output-format": "output_format", "-m": "model", "--model": "model",
           "-r": "resume", "--resume": "resume", "--session-id": "session_id"}
_FLAGS = {"-y", "--yolo", "--skip-trust"}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
BAD_INPUT = 42


def parse(argv: list[str]) -> dict[str, str]:
    args = list(argv)
    options: dict[str, str] = {}
    while args:
        arg = args.pop(0)
        if arg in _VALUED and args:
            options[_VALUED[arg]] = args.pop(0)
        elif arg not in _FLAGS:
            play.fail(f"Unknown argument: {arg.lstrip('-')}")
    return options


class Run:
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.sessions = play.Sessions(play.home("GEMINI_CLI_HOME", ".") / ".gemini")
        self.said = sys.stdin.read() + options.get("prompt", "")
        self.prompt = self.sessions.heard(options.get("resume"), self.said)
        self.scenario = play.choose("gemini", self.prompt)
        self.model = options.get("model", "gemini-2.5-flash")

    def event(self, kind: str, **fields: Any) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        play.emit({"type": kind, "timestamp": stamp, **fields})
        play.pause()

    def result(self, status: str, exit_status: int, error: str = "") -> None:
        stats = {"total_tokens": 1050, "input_tokens": 1000, "output_tokens": 50, "cached": 0,
                 "input": 1000, "duration_ms": 10, "tool_calls": 1}
        fields: dict[str, Any] = {"status": status,
                                  "stats": {**stats, "models": {self.model: stats}}}
        if error:
            fields["error"] = {"type": "unknown", "message": error}
        self.event("result", **fields)
        play.linger_if(self.scenario)
        sys.exit(exit_status)

    def session(self) -> str:
        resume = self.options.get("resume")
        if resume is not None:
            if self.scenario.name == "session-missing":
                self.sessions.forget(resume)
            if not self.sessions.exists(resume):
                play.fail(f'Error resuming session: Invalid session identifier "{resume}".',
                          BAD_INPUT)
            return resume
        session_id = self.options.get("session_id") or str(uuid.uuid4())
        if not _UUID.match(session_id):
            play.fail(f'Error starting session: Invalid session ID "{session_id}"', BAD_INPUT)
        if self.sessions.exists(session_id):
            play.fail(f'Error starting session: Session ID "{session_id}" already exists. '
                      "Use --resume to resume it, or provide a different ID.", BAD_INPUT)
        return session_id

    def play(self) -> None:
        name = self.scenario.name
        if name == "auth":
            play.fail("Please set an Auth method in your settings.json or specify one of the "
                      "following environment variables before running: GEMINI_API_KEY", 41)
        session_id = self.session()
        turn = self.sessions.next_turn(session_id, self.said)
        self.event("init", session_id=session_id, model=self.model)
        self.event("message", role="user", content=self.said)
        play.wait_at_gate()
        if name == "capacity":
            self.spent()
        if name in ("hang", "reconnect-forever"):
            play.hang()
        if name == "crash":
            play.fail("TypeError: Cannot read properties of undefined (reading 'parts')")
        self.tool(name)
        for piece in self.final(turn):
            self.event("message", role="assistant", content=piece, delta=True)
        self.result("success", 0)

    def final(self, turn: int) -> list[str]:
        """The final message, in the pieces gemini streams it as."""
        if self.scenario.name == "prose" and not self.said.startswith(play.REPAIR):
            return ["I fixed the bug ", "and the tests pass."]
        text = json.dumps(play.answer(self.scenario, turn, self.prompt, Path.cwd()))
        middle = len(text) // 2
        return [text[:middle], text[middle:]]

    def tool(self, name: str) -> None:
        tool_id = f"run_shell_command_{uuid.uuid4().hex[:12]}"
        self.event("tool_use", tool_name="run_shell_command", tool_id=tool_id,
                   parameters={"command": "make test"})
        if name == "garbage":
            sys.stdout.write("not json at all\n{\"type\": \"message\", broken\n\x00\x01\n")
        if name == "silent-tool":
            play.silent_tool(self.scenario)
        if name == "grandchildren":
            play.spawn_stubborn_descendants()
            play.hang()
        if name == "slow":
            interval, count = self.scenario.number(1.0), int(self.scenario.number(5, 1))
            for step in range(count):
                time.sleep(interval)
                self.event("message", role="assistant", content=f"still working {step}",
                           delta=True)
        self.event("tool_result", tool_id=tool_id, status="success", output="ok")

    def spent(self) -> None:
        """gemini's words for a spent daily quota, and its wait on stderr."""
        resets = play.resets_at(self.scenario)
        wait = "" if resets is None else f" Please retry in {max(0, int(resets - time.time()))}s."
        sys.stderr.write(f"TerminalQuotaError: You have exhausted your daily quota on this "
                         f"model.\n  cause: {{ code: 429, message: 'You exceeded your current "
                         f"quota.{wait}' }}\n")
        sys.stderr.flush()
        self.result("error", 1, "[API Error: You have exhausted your daily quota on this "
                    "model.]\nPlease wait and try again later.")


def main(argv: list[str] | None = None) -> None:
    args = play.arguments(argv, "0.61.0")
    if args is None:
        return
    Run(parse(args)).play()


if __name__ == "__main__":
    main()
