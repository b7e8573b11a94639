"""Simulated ``opencode`` (opencode 1.18 shaped) for demos, tests and benchmarks.

Accepts the argv lane-runner uses (``run --format json --print-logs --log-level ERROR
--auto --title T -m PROVIDER/MODEL [--variant V] [--session ID]``, the prompt on stdin)
and answers anything else as yargs does: the command's usage on stderr, exit 1.
Events are opencode's (``step_start``, ``text``, ``tool_use``, ``step_finish``); a
spent quota is opencode's silent retry, said only in ``stream error`` log lines on
stderr. The answer is the final text: ``prose`` answers in words first and in the
schema on the repair turn (``providers/prompted.py``).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from lane_runner.providers.simulators import play

_VALUED = {"--format": "format", "--log-level": "log_level", "--title": "title",
           "-m": "model", "--model": "model", "--variant": "variant", "-s": "session",
           "--session": "session"}
_FLAGS = {"--print-logs", "--auto"}
_USAGE = "opencode run [message..]\n\nrun opencode with a message\n"


def parse(argv: list[str]) -> dict[str, str]:
    args = list(argv)
    if not args or args.pop(0) != "run":
        play.fail(_USAGE)
    options: dict[str, str] = {}
    while args:
        arg = args.pop(0)
        if arg in _VALUED and args:
            options[_VALUED[arg]] = args.pop(0)
        elif arg not in _FLAGS:
            play.fail(_USAGE)
    return options


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class Run:
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.sessions = play.Sessions(play.home("XDG_DATA_HOME", ".local/share") / "opencode")
        self.said = sys.stdin.read()
        self.prompt = self.sessions.heard(options.get("session"), self.said)
        self.scenario = play.choose("opencode", self.prompt)
        self.session_id = ""
        self.message_id = ""

    def event(self, kind: str, **part: Any) -> None:
        play.emit({"type": kind, "timestamp": int(time.time() * 1000),
                   "sessionID": self.session_id,
                   "part": {"id": _id("prt"), "messageID": self.message_id,
                            "sessionID": self.session_id, **part}})
        play.pause()

    def step(self, reason: str, turn: int) -> None:
        self.event("step_finish", type="step-finish", reason=reason, cost=0,
                   tokens={"total": 1050 * turn, "input": 1000 * turn, "output": 50,
                           "reasoning": 0, "cache": {"read": 0, "write": 0}})

    def log_error(self, said: str) -> None:
        sys.stderr.write(f'timestamp=2026-01-01T00:00:00.000Z level=ERROR message="stream '
                         f'error" session.id={self.session_id} error.error="{said}"\n')
        sys.stderr.flush()

    def session(self) -> None:
        resume = self.options.get("session")
        if resume is not None:
            if self.scenario.name == "session-missing":
                self.sessions.forget(resume)
            if not self.sessions.exists(resume):
                play.fail("Error: Session not found")
        self.session_id = resume or _id("ses")

    def play(self) -> None:
        self.session()
        turn = self.sessions.next_turn(self.session_id, self.said)
        name = self.scenario.name
        play.wait_at_gate()
        if name in ("capacity", "reconnect-forever"):
            self.retry_forever(name)
        if name == "auth":
            play.fail("ProviderAuthError: API key is missing for the selected provider")
        if name == "hang":
            play.hang()
        if name == "crash":
            play.fail("TypeError: undefined is not an object (evaluating 'part.state')")
        self.message_id = _id("msg")
        self.event("step_start", type="step-start")
        self.tool(name)
        if name == "slow":
            interval, count = self.scenario.number(1.0), int(self.scenario.number(5, 1))
            for step in range(count):
                time.sleep(interval)
                self.event("text", type="text", text=f"still working ({step + 1}/{count})")
        self.step("tool-calls", turn)
        self.message_id = _id("msg")
        self.event("step_start", type="step-start")
        self.event("text", type="text", text=self.final(turn))
        self.step("stop", turn)
        play.linger_if(self.scenario)

    def final(self, turn: int) -> str:
        if self.scenario.name == "prose" and not self.said.startswith(play.REPAIR):
            return "I fixed the bug and ran the tests; everything passes."
        structured = play.answer(self.scenario, turn, self.prompt, Path.cwd())
        return json.dumps(structured)

    def tool(self, name: str) -> None:
        if name == "garbage":
            sys.stdout.write("not json at all\n{\"type\": \"text\", broken\n\x00\x01\n")
        if name == "silent-tool":
            play.silent_tool(self.scenario)
        if name == "grandchildren":
            pids = play.spawn_stubborn_descendants()
            self.event("text", type="text", text=f"pids: {' '.join(map(str, pids))}")
            play.hang()
        self.event("tool_use", type="tool", tool="bash", callID=_id("call"), state={
            "status": "completed", "input": {"command": "make test"}, "output": "ok"})

    def retry_forever(self, name: str) -> None:
        """opencode's retry of a failing API: nothing on stdout, a log line per try, in the
        API's words (``capacity:SECONDS``: the wait the API names)."""
        resets = play.resets_at(self.scenario)
        seconds = None if resets is None else max(0, int(resets - time.time()))
        wait = "" if seconds is None else f" Please try again in {seconds}s."
        said = ("AI_APICallError: You exceeded your current quota, please check your plan "
                f"and billing details.{wait}" if name == "capacity"
                else "AI_APICallError: Cannot connect to API: connect ECONNREFUSED")
        while True:
            self.log_error(said)
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    args = play.arguments(argv, "1.18.0")
    if args is None:
        return
    Run(parse(args)).play()


if __name__ == "__main__":
    main()
