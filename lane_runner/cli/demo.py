"""``lane-runner demo``: the whole product on a throw-away home, in about ten seconds.

A git repository, a board of eight tasks over codex and claude (automatic and
manual lanes, a capacity fallback, a goal-mode continuation, a parent and its
child), a daemon that is killed with SIGKILL in the middle, ``recover``, a
restart, and the outcome as an operator would read it. The simulated CLIs stand
in for the real ones when those are not installed. With ``--json`` the narration
goes to stderr and stdout gets one document: each task's outcome and the journal.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lane_runner import files
from lane_runner.board.model import NewTask, Status, Task
from lane_runner.board.sqlite import SqliteStore
from lane_runner.cli.output import print_json, table
from lane_runner.errors import LaneRunnerError
from lane_runner.home import Home
from lane_runner.providers import ADAPTERS
from lane_runner.run import lanestate

BOARD = "demo"
TIMEOUT = 50.0


@dataclass(frozen=True)
class DemoTask:
    key: str
    title: str
    body: str
    assignee: str
    goal_turns: int = 1
    parent: str | None = None


TASKS = (
    DemoTask("docs", "Write a CONTRIBUTING guide", "Explain setup, tests and review.", "cli-auto"),
    DemoTask(
        "tests", "Add tokenizer unit tests", "Cover empty input and unicode.", "cli-codex-high"
    ),
    DemoTask(
        "review", "Review the error messages", "Make each say what to do.", "cli-claude-medium"
    ),
    DemoTask(
        "fallback",
        "Speed up the config loader",
        "Cache the parsed file. [sim@codex:capacity]",
        "cli-codex-medium",
    ),
    DemoTask(
        "goal",
        "Finish the migration guide",
        "All sections, no TODOs left. [sim:goal:2]",
        "cli-auto",
        # Two turns on one session; four leave room for the restart to change provider
        # mid-goal (the new session starts its count again).
        goal_turns=4,
    ),
    DemoTask(
        "long", "Profile the importer", "Measure and report. [sim:slow:0.25:8]", "cli-codex-low"
    ),
    DemoTask(
        "child",
        "Announce the contributing guide",
        "Post a short note.",
        "cli-claude-low",
        parent="docs",
    ),
    DemoTask("changelog", "Tidy the changelog", "Group entries by release.", "cli-auto"),
)

CONFIG = """\
# written by 'lane-runner demo'
concurrency = 4
simulate = {simulate}
lease_ttl = 60
heartbeat_interval = 0.5
stall_timeout = 20
shutdown_grace = 2
cooldown_base = 1
"""
#: As root, claude refuses to skip permissions unless told it is in a sandbox: this
#: home is a throw-away directory, which is what IS_SANDBOX declares. In the config,
#: every run on the home (and ``doctor``) sees it, not only the demo's daemon.
SANDBOX = """claude_env = { IS_SANDBOX = "1" }
"""


Say = Callable[[str], None]


def _git(*args: str, cwd: Path) -> None:
    argv = ["git", "-c", "user.name=lane-runner demo", "-c", "user.email=demo@localhost", *args]
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LaneRunnerError(
            f"the demo needs git to make its repository: {error}; install git and try again"
        ) from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise LaneRunnerError(f"git {args[0]} failed in {cwd}: {said}")


def _make_repository(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    _git("init", "-q", "-b", "main", cwd=path)
    (path / "README.md").write_text("# demo project\n")
    _git("add", ".", cwd=path)
    _git("commit", "-qm", "initial commit", cwd=path)


def _file_tasks(store: SqliteStore, repository: Path) -> dict[str, str]:
    board = store.create_board(BOARD)
    ids: dict[str, str] = {}
    for spec in TASKS:
        parents = (ids[spec.parent],) if spec.parent else ()
        task = board.add_task(
            NewTask(
                title=spec.title,
                body=spec.body,
                id=spec.key,
                assignee=spec.assignee,
                parents=parents,
                workspace=str(repository),
                goal_turns=spec.goal_turns,
            )
        )
        ids[spec.key] = task.id
    return ids


class Runner:
    """The daemon as a child process, watched through the board."""

    def __init__(self, home: Path, environ: dict[str, str]) -> None:
        self.home = home
        self.environ = environ

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "lane_runner.cli.main", "--home", str(self.home), *extra],
            env=self.environ,
            stderr=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )

    def recover(self) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "lane_runner.cli.main", "--home", str(self.home), "recover"],
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return result.stdout.strip() or result.stderr.strip()


class Watcher:
    """Prints board events as they happen; the demo's progress display."""

    def __init__(self, store: SqliteStore, say: Say) -> None:
        self.board = store.board(BOARD)
        self.say = say
        self.seen = 0
        self.comments_seen: set[int] = set()

    def poll(self) -> None:
        lines = []
        for event in self.board.events(after_id=self.seen):
            self.seen = event.id
            lines.append(
                (event.at, _describe_event(event.kind, event.task_id, event.run_id, event.data))
            )
        for task in self.board.list_tasks():
            for comment in self.board.comments(task.id):
                if comment.id not in self.comments_seen and comment.author == "lane-runner":
                    self.comments_seen.add(comment.id)
                    lines.append((comment.at, f"{task.id:<10} {comment.body}"))
        for at, line in sorted(lines):
            if line:
                self.say(f"  {time.strftime('%H:%M:%S', time.localtime(at))}  {line[:150]}")

    def wait(self, condition: Callable[[list[Task]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            if condition(self.board.list_tasks()):
                return True
            time.sleep(0.1)
        self.poll()
        return False


def _describe_event(kind: str, task_id: str, run_id: int | None, data: dict[str, object]) -> str:
    reason = str(data.get("reason") or data.get("outcome") or "")
    if kind == "claimed":
        return f"{task_id:<10} claimed (run {run_id})"
    if kind == "completed":
        return f"{task_id:<10} done (run {run_id})"
    if kind == "blocked":
        return f"{task_id:<10} blocked: {reason}"
    if kind == "reclaimed":
        return f"{task_id:<10} back to ready: {reason}"
    if kind == "promoted":
        return f"{task_id:<10} ready (its parent is done)"
    return ""


def _settled(tasks: list[Task]) -> bool:
    """Every task done or blocked: nothing more will happen without a person."""
    return all(task.status in (Status.DONE, Status.BLOCKED) for task in tasks)


def _all_done(tasks: list[Task]) -> bool:
    return all(task.status is Status.DONE for task in tasks)


def _outcomes(home: Home, store: SqliteStore) -> list[dict[str, Any]]:
    """Each task's outcome: who ran it (from its lane state), how many runs, what it said."""
    board = store.board(BOARD)
    found = []
    for task in board.list_tasks():
        state = lanestate.load(home.lane_dir(BOARD), BOARD, task.id, task.completed_run_id or 1)
        route = state.route or {}
        found.append(
            {
                "task": task.id,
                "status": task.status.value,
                "assignee": task.assignee,
                "provider": route.get("provider"),
                "effort": route.get("effort"),
                "runs": len(board.runs(task.id)),
                "summary": task.summary or task.block_reason or "",
            }
        )
    return found


def _outcome_table(outcomes: list[dict[str, Any]]) -> str:
    rows = [
        (
            o["task"],
            o["status"],
            o["assignee"],
            f"{o['provider']}/{o['effort']}" if o["provider"] else None,
            o["runs"],
            o["summary"][:60],
        )
        for o in outcomes
    ]
    return table(("task", "status", "assignee", "provider", "runs", "summary"), rows)


def _journal_files(directory: Path) -> list[dict[str, Any]]:
    return [
        {"file": path.name, "bytes": path.stat().st_size}
        for path in sorted(directory.iterdir())
        if path.is_file()
    ]


def _count(tasks: list[Task], status: Status) -> int:
    return sum(task.status is status for task in tasks)


def _narrator(as_json: bool) -> Say:
    stream = sys.stderr if as_json else sys.stdout
    return lambda text: print(text, file=stream, flush=True)


def run(
    home: Path | None = None, *, simulated: bool = False, as_json: bool = False,
    keep: bool = False,
) -> int:
    """The demo in ``home`` (a new temporary directory by default), removed at the end
    unless ``keep``: what it made goes, a directory it was given stays, empty."""
    root = home or Path(tempfile.mkdtemp(prefix="lane-runner-demo-"))
    made = home is None or not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise LaneRunnerError(f"demo home {root} is not empty; give an empty or new directory")
    root.chmod(files.PRIVATE_DIR)  # a home is private (doctor says so of any other)
    try:
        return _play(root, simulated, as_json, keep)
    finally:
        if not keep:
            _remove(root, made)


def _remove(root: Path, made: bool) -> None:
    """The demo's files gone: ``root`` itself when the demo made it, else what is in it."""
    if made:
        shutil.rmtree(root, ignore_errors=True)
        return
    for entry in root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _play(root: Path, simulated: bool, as_json: bool, keep: bool) -> int:
    started = time.monotonic()
    say = _narrator(as_json)
    layout, simulate = _set_up(root, simulated, say)
    store = SqliteStore(layout.boards)
    _file_tasks(store, root / "project")
    say(f"filed {len(TASKS)} tasks on board '{BOARD}'; starting the daemon")
    runner = Runner(root, {**os.environ, "LANE_RUNNER_HOME": str(root)})
    watcher = Watcher(store, say)
    crashed = _crash(runner, watcher, say)
    say("\nrestarting the daemon")
    daemon = runner.start("run", "--until-idle")
    watcher.wait(_settled, max(5.0, TIMEOUT - (time.monotonic() - started)))
    try:
        daemon.wait(timeout=15)
    except subprocess.TimeoutExpired:
        daemon.terminate()
        daemon.wait()
    watcher.poll()
    outcomes = _outcomes(layout, store)
    finished = _all_done(store.board(BOARD).list_tasks())
    journal = _journal_files(layout.lane_dir(BOARD))
    seconds = round(time.monotonic() - started, 1)
    store.close()
    say("\n" + _outcome_table(outcomes))
    say(f"\njournal directory {layout.lane_dir(BOARD)}:")
    say(table(("file", "bytes"), [(f["file"], f["bytes"]) for f in journal]))
    if keep:
        say(f"\nfinished in {seconds:.1f} s; inspect with: lane-runner --home {root} task ls")
    else:
        say(f"\nfinished in {seconds:.1f} s; {root} is removed now (--keep keeps it to inspect)")
    if as_json:
        print_json(
            {
                "home": str(root),
                "kept": keep,
                "simulated": simulate,
                "killed_mid_run": crashed,
                "finished": finished,
                "seconds": seconds,
                "tasks": outcomes,
                "journal": {"directory": str(layout.lane_dir(BOARD)), "files": journal},
            }
        )
    return 0 if finished else 1


def _set_up(root: Path, simulated: bool, say: Say) -> tuple[Home, bool]:
    """The demo's home, configuration and repository; whether it simulates the CLIs
    (asked, or one of them is not installed)."""
    simulate = simulated or not all(shutil.which(cli.command) for cli in ADAPTERS.values())
    layout = Home(root)
    layout.ensure()
    text = CONFIG.format(simulate=str(simulate).lower()) + (SANDBOX if os.geteuid() == 0 else "")
    files.write(layout.config_file, text.encode())
    say(f"lane-runner demo in {root}" + (" (simulated CLIs)" if simulate else ""))
    _make_repository(root / "project")
    return layout, simulate


def _crash(runner: Runner, watcher: Watcher, say: Say) -> bool:
    """Start the daemon, kill -9 it once three tasks are done and the long one runs (or
    at half the time), and recover; whether the kill came mid-run."""
    daemon = runner.start("run")
    crashed = watcher.wait(
        lambda tasks: (
            _count(tasks, Status.DONE) >= 3
            and any(t.id == "long" and t.status is Status.RUNNING for t in tasks)
        ),
        TIMEOUT / 2,
    )
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    say(
        f"\n*** kill -9 of the daemon (pid {daemon.pid})"
        + (" mid-run" if crashed else "")
        + " ***\n"
    )
    say("$ lane-runner recover")
    say("\n".join("  " + line for line in runner.recover().splitlines()))
    return crashed
