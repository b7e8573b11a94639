"""What the simulated CLIs share: scenario choice, session store, the answer.

A scenario comes from (first match wins) the control file named by
``LANE_RUNNER_SIM_CONTROL`` (JSON ``{"codex": "capacity"}``, re-read on every
run so tests can flip capacity while a daemon runs), a ``[sim:NAME]`` or
``[sim:NAME:ARG]`` marker in the prompt (``[sim@codex:NAME]`` applies to one
provider only, e.g. a capacity failure that a fallback to the other survives),
``LANE_RUNNER_SIM_SCENARIO``, else ``success``. ``prose`` (opencode and gemini, which
have no schema flag) answers in words, and in the schema once the repair turn asks.

``LANE_RUNNER_SIM_STARTED_LOG`` names a file each run appends one JSON line to
at startup: when the kernel forked the process and when the simulator code began
running (both wall-clock seconds), so benchmarks can time "ready → started", and the
working directory (the task's worktree), so the crash campaign (``bench/campaign``)
can count each task's CLI runs.

``LANE_RUNNER_SIM_ENDED_LOG`` names a file each run appends one JSON line to as it exits
(its pid and the wall-clock moment): with the start log, a CLI's own run time, which
``bench/figures/verify_cost.py`` takes out of the runner's share.

``LANE_RUNNER_SIM_GATE`` names a file: while it exists, each run waits after its
first event, before its scenario plays out, so a test can hold every CLI at one
point (then, say, lock the board) and let them all finish at once by removing it.
``LANE_RUNNER_SIM_TOOL_GATE`` does the same inside ``silent-tool``'s tool call.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCENARIOS = frozenset({
    "success", "incomplete", "blocked", "capacity", "auth", "session-missing", "hang",
    "reconnect-forever", "crash", "garbage", "huge", "grandchildren", "slow", "goal", "nul",
    "unfinished", "artifacts", "linger", "long-summary", "escapes", "commit", "nochange",
    "long-answer", "silent-tool", "checkout", "prose", "feedback",
})
_MARKER = re.compile(r"\[sim(?:@([a-z]+))?:([a-z-]+)(?::([^\]]*))?\]")
OUTPUT_FILE = "sim-output.txt"
#: How the runner's repair turn begins (``providers/prompted.repair``): ``prose`` answers
#: in words until it is asked so.
REPAIR = "Your last message was not accepted"
#: ``feedback``: a line ``SIM-FIX: NAME`` in the prompt (a check's output, a reviewer's
#: finding fed back) makes the simulated worker create NAME in its worktree.
_FIX = re.compile(r"SIM-FIX: ([A-Za-z0-9][A-Za-z0-9._-]*)")
#: ``feedback``: the simulated reviewer asks for changes until the worktree holds this.
REVIEWED_FILE = "sim-reviewed.txt"


@dataclass(frozen=True)
class Scenario:
    name: str
    arg: str = ""

    def number(self, default: float, index: int = 0) -> float:
        parts = [part for part in self.arg.split(":") if part]
        return float(parts[index]) if len(parts) > index else default


def _parse(text: str) -> Scenario:
    name, _, arg = text.partition(":")
    if name not in SCENARIOS:
        sys.exit(f"simulator: unknown scenario {name!r}")
    return Scenario(name, arg)


def choose(provider: str, prompt: str) -> Scenario:
    control = os.environ.get("LANE_RUNNER_SIM_CONTROL")
    if control:
        try:
            wanted = json.loads(Path(control).read_text()).get(provider)
        except (OSError, ValueError):
            wanted = None
        if wanted:
            return _parse(str(wanted))
    for marker in _MARKER.finditer(prompt):
        if marker.group(1) in (None, provider):
            return _parse(f"{marker.group(2)}:{marker.group(3) or ''}")
    return _parse(os.environ.get("LANE_RUNNER_SIM_SCENARIO") or "success")


def arguments(argv: list[str] | None, version: str) -> list[str] | None:
    """A simulated CLI's arguments (``argv``, else the process's), its start noted; None
    when it was asked only for its ``--version`` (printed: what ``doctor`` runs, as the
    worker user when there is one)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        print(version)
        return None
    note_start()
    ended = os.environ.get("LANE_RUNNER_SIM_ENDED_LOG")
    if ended:
        atexit.register(_note_end, ended)
    return args


def _note_end(target: str) -> None:
    with open(target, "a", encoding="utf-8") as log:
        log.write(json.dumps({"pid": os.getpid(), "ended_at": time.time()}) + "\n")


def note_start() -> None:
    """Append this process's start times to ``LANE_RUNNER_SIM_STARTED_LOG``, if set.

    The fork time comes from ``/proc/self/stat`` (clock ticks since boot, so
    10 ms resolution on the usual 100 Hz) because interpreter start-up would
    otherwise count as dispatch latency.
    """
    target = os.environ.get("LANE_RUNNER_SIM_STARTED_LOG")
    if not target:
        return
    now, since_boot = time.time(), time.clock_gettime(time.CLOCK_BOOTTIME)
    stat = Path("/proc/self/stat").read_text()
    ticks = int(stat.rpartition(")")[2].split()[19])
    forked_at = now - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    line = json.dumps({"pid": os.getpid(), "forked_at": forked_at, "running_at": now,
                       "cwd": os.getcwd()})
    with open(target, "a", encoding="utf-8") as log:
        log.write(line + "\n")


def wait_at_gate() -> None:
    """Wait while the file named by ``LANE_RUNNER_SIM_GATE`` exists (see the docstring above)."""
    gate = os.environ.get("LANE_RUNNER_SIM_GATE")
    while gate and os.path.lexists(gate):
        time.sleep(0.02)


def pause(scale: float = 1.0) -> None:
    """Pacing between events: none unless ``LANE_RUNNER_SIM_DELAY`` asks for it."""
    delay = float(os.environ.get("LANE_RUNNER_SIM_DELAY") or 0) * scale
    if delay > 0:
        time.sleep(delay)


def hang() -> None:
    while True:
        time.sleep(3600)


def resets_at(scenario: Scenario) -> float | None:
    """``capacity:N``: the limit resets N seconds from now (None for a bare ``capacity``,
    whose words name no reset, as when the API said none)."""
    seconds = scenario.number(-1.0)
    return None if seconds < 0 else time.time() + seconds


def codex_limit_text(scenario: Scenario) -> str:
    """codex's usage-limit words, with "try again at" in the local zone when they name
    the reset (as codex-cli 0.171.0 prints them)."""
    resets = resets_at(scenario)
    head = "You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), or "
    if resets is None:
        return head + "try again later."
    moment = datetime.fromtimestamp(resets).astimezone()
    return head + f"try again at {moment.strftime('%I:%M %p').lstrip('0')}."


def claude_limit_text(resets: float | None) -> str:
    """claude's words: with an API key a bare 429, on a claude.ai login its limit and
    the reset in UTC (as Claude Code 2.1.332 prints them)."""
    if resets is None:
        return "API Error: Request rejected (429) · Rate limited"
    moment = datetime.fromtimestamp(resets, UTC)
    said = moment.strftime("%I:%M%p").lstrip("0").lower()
    return f"You've hit your 5-hour limit · resets {said} (UTC)"


def linger_if(scenario: Scenario) -> None:
    """``linger``: stay alive after the final answer, as Claude Code does while a
    ``SessionEnd`` hook runs (and codex may after ``turn.completed``)."""
    if scenario.name == "linger":
        hang()


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def fail(message: str, status: int = 1) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    sys.exit(status)


class Sessions:
    """Sessions under the CLI's home, so resume works across processes; each keeps the
    prompts it was given, as a real CLI's conversation does, so a resumed turn told only
    what is new still plays the scenario its task named."""

    def __init__(self, root: Path) -> None:
        self._root = root / "sim-sessions"

    def _path(self, session_id: str) -> Path:
        return self._root / f"{session_id}.json"

    def exists(self, session_id: str) -> bool:
        return self._path(session_id).is_file()

    def forget(self, session_id: str) -> None:
        self._path(session_id).unlink(missing_ok=True)

    def _saved(self, session_id: str) -> dict[str, Any]:
        path = self._path(session_id)
        return dict(json.loads(path.read_text())) if path.is_file() else {}

    def heard(self, session_id: str | None, prompt: str) -> str:
        """What the model has in front of it this turn: the session's earlier prompts (none
        for a new or unknown session), then ``prompt``."""
        earlier = self._saved(session_id).get("prompts", []) if session_id else []
        return "\n\n".join([*earlier, prompt])

    def next_turn(self, session_id: str, prompt: str = "") -> int:
        """Record one more turn of the session, told ``prompt``; the new turn's number
        (1-based)."""
        saved = self._saved(session_id)
        turns = int(saved.get("turns", 0)) + 1
        self._root.mkdir(parents=True, exist_ok=True)
        prompts = [*saved.get("prompts", []), prompt]
        self._path(session_id).write_text(json.dumps({"turns": turns, "prompts": prompts}))
        return turns


def home(variable: str, fallback: str) -> Path:
    configured = os.environ.get(variable)
    return Path(configured) if configured else Path.home() / fallback


def answer(scenario: Scenario, turn: int, prompt: str, workspace: Path) -> dict[str, Any]:
    """The worker result for a scenario that finishes its turn normally.

    ``goal:N`` answers incomplete, with an unfinished-work marker, until turn N.
    ``unfinished`` says completed while its summary admits work remains;
    ``artifacts`` names one real file and three that are not the worktree's.
    ``long-summary:N`` answers incomplete with a summary of N characters (``a-a-…``, a
    run a pattern tried from every position of would take quadratic time on).
    ``commit`` commits its edit itself, as a worker may; ``nochange`` edits nothing.
    ``checkout:MODE[:commit]`` moves HEAD off the task's branch before its edit, as agents
    do: ``branch`` (``git checkout -b fix``), ``detach`` or ``orphan`` (a branch with no
    commit); with ``:commit`` it commits its edit there itself.
    ``long-answer:N`` completes with a summary of N characters and 200 long findings:
    more than a journal record holds.
    A completing answer really edits the workspace so git sees a diff.
    """
    result: dict[str, Any] = {
        "status": "completed", "summary": "", "changed_files": [], "tests_run": [],
        "artifacts": [], "findings": [], "blockers": [],
    }
    if not _answered_early(scenario, turn, prompt, workspace, result):
        _work(scenario, turn, prompt, workspace, result)
    return result


def _answered_early(
    scenario: Scenario, turn: int, prompt: str, workspace: Path, result: dict[str, Any]
) -> bool:
    """Fill ``result`` for the scenarios that answer without the usual edit (see
    ``answer``); False for the ones that do the work."""
    goal = int(scenario.number(1)) if scenario.name == "goal" else 1
    if scenario.name == "long-summary":
        size = int(scenario.number(1 << 20))
        result.update(status="incomplete", summary=("a-" * (size // 2 + 1))[:size])
        return True
    if scenario.name == "long-answer":  # completed, but more than the journal keeps
        size = int(scenario.number(2 << 20))
        first_line = (prompt.strip().splitlines() or [""])[0][:120]
        (workspace / OUTPUT_FILE).write_text(f"turn {turn}: {first_line}\n", encoding="utf-8")
        result.update(summary="done: " + "x" * size, changed_files=[OUTPUT_FILE],
                      findings=[f"finding {i}: " + "y" * 1000 for i in range(200)])
        return True
    if scenario.name == "incomplete" or turn < goal:
        result.update(status="incomplete", summary=f"turn {turn}: TODO: remaining work")
        return True
    if scenario.name == "blocked":
        result.update(status="blocked", summary="cannot proceed",
                      blockers=["simulated blocker: the task needs a human decision"])
        return True
    if scenario.name == "nochange":
        result.update(summary=f"nothing needed changing (turn {turn})")
        return True
    return False


def _work(
    scenario: Scenario, turn: int, prompt: str, workspace: Path, result: dict[str, Any]
) -> None:
    """A completing turn: edit the workspace (HEAD moved first, or the edit committed by
    the worker itself, when the scenario says), with the summary, artifacts or text the
    scenario answers with."""
    first_line = (prompt.strip().splitlines() or [""])[0][:120]
    if scenario.name == "feedback":
        for name in sorted(set(_FIX.findall(prompt))):
            (workspace / name).write_text(f"fixed in turn {turn}\n", encoding="utf-8")
    if scenario.name == "checkout":
        move_head(workspace, scenario.arg.split(":")[0])
    with (workspace / OUTPUT_FILE).open("a", encoding="utf-8") as out:
        out.write(f"turn {turn}: {first_line}\n")
    result.update(summary=f"simulated work done in turn {turn}", changed_files=[OUTPUT_FILE])
    if scenario.name == "commit" or scenario.arg.endswith(":commit"):
        commit_by_itself(workspace, f"simulated worker commit, turn {turn}")
    if scenario.name == "unfinished":
        result.update(summary=f"turn {turn}: wired the parser; TODO: the CLI flag")
    if scenario.name == "artifacts":
        outside = workspace.parent / "outside.txt"
        outside.write_text("not the worktree's\n")
        result.update(artifacts=[OUTPUT_FILE, str(outside), "missing.txt", "../outside.txt"])
    if scenario.name == "escapes":  # a tool's colours or a hostile title, quoted by the model
        result.update(summary="done \x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m\r fake line")
    if scenario.name == "nul":  # models do emit \u0000; PostgreSQL text cannot hold it
        result.update(summary="done\x00 with a NUL", findings=["a NUL\x00 in a finding"])


def reviews(schema: str) -> bool:
    """Whether the answer the CLI is asked for is a reviewer's: its schema has a verdict
    (the runner hands a reviewer ``review-result.wire.json``)."""
    return '"verdict"' in schema


def review(scenario: Scenario, workspace: Path) -> dict[str, Any]:
    """A reviewer's verdict; it changes nothing. ``feedback`` asks for changes until the
    worktree holds ``REVIEWED_FILE`` (its finding says ``SIM-FIX:`` it, so a worker in
    ``feedback`` makes it once told); every other scenario approves."""
    if scenario.name == "feedback" and not (workspace / REVIEWED_FILE).exists():
        return {"verdict": "request_changes", "summary": "the change lacks its review note",
                "findings": [{"file": REVIEWED_FILE, "line": 0, "severity": "major",
                              "text": f"missing: add it (SIM-FIX: {REVIEWED_FILE})"}]}
    return {"verdict": "approve", "summary": "the change does what the task asks",
            "findings": []}


def move_head(workspace: Path, mode: str) -> None:
    """HEAD off the task's branch: ``branch``, ``detach`` or ``orphan`` (see ``answer``)."""
    argv = {"branch": ["-b", "fix"], "detach": ["--detach"], "orphan": ["--orphan", "elsewhere"]}
    subprocess.run(["git", "checkout", "--quiet", *argv[mode]], cwd=workspace, check=True,
                   capture_output=True)


def commit_by_itself(workspace: Path, message: str) -> None:
    """Commit the simulated edit the way a worker would, with its own identity."""
    for argv in (["add", OUTPUT_FILE], ["commit", "--quiet", "--message", message]):
        subprocess.run(
            ["git", "-c", "user.name=simulated worker", "-c", "user.email=worker@localhost",
             *argv],
            cwd=workspace, check=True, capture_output=True,
        )


def spawn_stubborn_descendants() -> list[int]:
    """Two sleepers that ignore SIGTERM: one in our group, one in its own session.

    Each says "ready" once its signal handling is in place, so a test that
    kills the tree right after sees the stubborn versions, not a racy start.
    """
    code = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "if sys.argv[1] == 'setsid': os.setsid()\n"
        "print('ready', flush=True)\n"
        "time.sleep(3600)\n"
    )
    sleepers = [
        subprocess.Popen([sys.executable, "-c", code, mode], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for mode in ("setsid", "group")
    ]
    for sleeper in sleepers:
        assert sleeper.stdout is not None
        sleeper.stdout.readline()
    return [sleeper.pid for sleeper in sleepers]


def silent_tool(scenario: Scenario) -> None:
    """``silent-tool:SECONDS:MODE``: a tool that prints nothing for SECONDS (10), as a build
    or a test suite does, in a child process: ``burn`` keeps a CPU busy the whole time (a
    compiler), ``sleep`` waits (a tool waiting on the network). The CLI prints nothing
    meanwhile either; the tool call is in flight."""
    seconds = scenario.number(10.0)
    mode = (scenario.arg.split(":") + ["", ""])[1] or "burn"
    code = (
        "import sys, time\n"
        "end = time.monotonic() + float(sys.argv[1])\n"
        "while time.monotonic() < end:\n"
        "    sum(range(10000)) if sys.argv[2] == 'burn' else time.sleep(0.05)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(seconds), mode], check=True,
                   stdin=subprocess.DEVNULL)
    gate = os.environ.get("LANE_RUNNER_SIM_TOOL_GATE")
    while gate and os.path.lexists(gate):
        time.sleep(0.02)
