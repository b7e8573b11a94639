"""Every git command and hook the runner starts is bounded as a tree (issue 48, item 2).

The runner's git runs none of the repository's hooks (issue 47, ``run/git.py``); a hook
is still the simplest git child that holds a git call, so the tests of how a git call is
bounded let it run one (``repository_hooks``, ``with_repository_hooks``), and one test
shows a real daemon never runs it. Real git, real hooks, real ``setsid`` and double
forks. Each case runs twice: in a cgroup of its own (where this host has a writable
cgroup v2 hierarchy) and without one (the session, the tree walk and the token). Waits
are bounded (``BOUND``) so a regression fails instead of hanging.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lane_runner.board.model import Status
from lane_runner.providers import cgroup
from lane_runner.run import command, git, hooks
from lane_runner.service import leftovers
from tests.harness import BOARD, Lane, with_repository_hooks

BOUND = 30.0

#: Shell lines starting ``sleep 600`` the ways a hook leaves a process behind; ``{pid}``
#: gets its pid. The hook waits for it, so the leftover is running when the hook ends.
BACKGROUND = "sh -c 'echo $$ > {pid}; exec sleep 600' &"
#: Each leftover writes its pid whole or not at all (a rename): a hook run twice (the
#: reference-transaction hook runs at "prepared" and "committed") finds the first pid and
#: returns at once, and its own child, ended with the git call, could leave the file
#: truncated and empty if it wrote in place (the test then saw no pid, now and then).
SETSID = "setsid sh -c 'echo $$ > {pid}.new && mv {pid}.new {pid}; exec sleep 600' &"
DOUBLE_FORK = "( setsid sh -c 'echo $$ > {pid}.new && mv {pid}.new {pid}; exec sleep 600' & )"
CLEARED = (
    "( setsid env -i /bin/sh -c 'echo $$ > {pid}.new && mv {pid}.new {pid}; exec sleep 600' & )"
)
WAIT_FOR = "while [ ! -s {pid} ]; do sleep 0.01; done"


def leaving(shape: str, pid: Path, then: str = "") -> str:
    """A shell script that leaves ``sleep 600`` behind as ``shape`` does, then ``then``."""
    return "\n".join([shape.format(pid=pid), WAIT_FOR.format(pid=pid), then])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def pid_in(file: Path) -> int:
    deadline = time.monotonic() + BOUND
    while not file.exists() or not file.read_text().strip():
        assert time.monotonic() < deadline, f"nothing wrote {file}"
        time.sleep(0.01)
    return int(file.read_text())


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, f"still waiting after {BOUND:g} s for {what}"
        time.sleep(0.05)


@pytest.fixture(params=["cgroup", "tree"])
def containment(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``cgroup``: each command in a group of its own; ``tree``: no cgroup to be had."""
    if request.param == "cgroup" and cgroup.parent() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    if request.param == "tree":
        monkeypatch.setattr(cgroup, "_base", lambda: None)
    return str(request.param)


@pytest.fixture
def ended() -> Iterator[list[Path]]:
    """Pid files of leftovers: whatever a failing test left running is killed after it."""
    files: list[Path] = []
    yield files
    for file in files:
        written = file.read_text().strip() if file.exists() else ""
        if written and alive(int(written)):
            os.kill(int(written), signal.SIGKILL)


@pytest.fixture
def repository_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's git runs the repository's hooks in this test (without
    ``core.hooksPath=/dev/null``)."""
    pairs = zip(git.NEUTRAL[1::2], git.NEUTRAL[2::2], strict=True)
    kept = [part for pair in pairs if not pair[1].startswith("core.hooksPath=") for part in pair]
    monkeypatch.setattr(git, "NEUTRAL", (git.NEUTRAL[0], *kept))


def repository(root: Path, post_checkout: str | None = None) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=repo,
                       check=True, capture_output=True)
    if post_checkout is not None:
        hook = repo / ".git" / "hooks" / "post-checkout"
        hook.write_text(f"#!/bin/sh\n{post_checkout}\n")
        hook.chmod(0o755)
    return repo


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """``call`` on a thread of its own; what it returned or raised lands in the list."""
    outcome: list[object] = []

    def target() -> None:
        try:
            outcome.append(call())
        except Exception as error:  # noqa: BLE001 - the test looks at what was raised
            outcome.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def test_a_post_checkout_hooks_setsid_child_neither_holds_the_worktree_add_nor_outlives_it(
    tmp_path: Path, containment: str, ended: list[Path], repository_hooks: None
) -> None:
    """The reviewer's indexer: ``setsid … &`` keeps git's stdout open; the add returns
    when git does, with git's output, and the indexer is gone."""
    pid = tmp_path / "indexer.pid"
    ended.append(pid)
    repo = repository(tmp_path, leaving(SETSID, pid, "echo indexing started"))
    thread, outcome = in_thread(
        lambda: git.run("worktree", "add", "-b", "task", str(tmp_path / "wt"), cwd=repo)
    )
    thread.join(BOUND)
    assert not thread.is_alive(), "the worktree add is held by the hook's leftover"
    [done] = outcome
    assert isinstance(done, subprocess.CompletedProcess), done
    assert done.returncode == 0 and "indexing started" in done.stderr, done
    assert not alive(pid_in(pid))


@pytest.mark.parametrize(
    ("hook", "shape"),
    [("after_run", BACKGROUND), ("before_remove", SETSID), ("before_remove", DOUBLE_FORK),
     ("after_run", CLEARED)],
    ids=["background", "setsid", "double-fork", "cleared-environment"],
)
def test_what_a_hook_leaves_running_ends_with_it(
    tmp_path: Path, containment: str, ended: list[Path], hook: str, shape: str
) -> None:
    if shape == CLEARED and containment == "tree":
        pytest.skip("a double-forked setsid child with a cleared environment takes a cgroup")
    pid = tmp_path / "leftover.pid"
    ended.append(pid)
    facts = hooks.Facts(BOARD, "t-1", "task", "lane/work/t-1", tmp_path)
    ran = hooks.run({"*": {hook: leaving(shape, pid, "echo done")}}, hook, facts)
    assert ran is not None and ran.ok and ran.output == "done", ran
    assert not alive(pid_in(pid))


def test_a_hook_past_its_deadline_is_ended_with_its_setsid_children(
    tmp_path: Path, containment: str, ended: list[Path]
) -> None:
    pid = tmp_path / "leftover.pid"
    ended.append(pid)
    facts = hooks.Facts(BOARD, "t-1", "task", "lane/work/t-1", tmp_path)
    script = leaving(SETSID, pid, "sleep 600")
    thread, outcome = in_thread(
        lambda: hooks.run({"*": {"after_run": script, "timeout": 1}}, "after_run", facts)
    )
    thread.join(BOUND)
    assert not thread.is_alive(), "the hook outlived its deadline"
    [ran] = outcome
    assert isinstance(ran, hooks.Ran) and ran.ended.startswith("was killed"), ran
    assert not alive(pid_in(pid))


def test_the_shutdown_ends_a_git_command_and_refuses_the_next(
    tmp_path: Path, containment: str, ended: list[Path], repository_hooks: None
) -> None:
    """A git held by its hook (in the foreground: git waits for it) until the runner's
    cancel event is set: the call raises ``Cancelled``, its tree is gone, and a later
    call on that thread does not start."""
    pid = tmp_path / "hook.pid"
    ended.append(pid)
    repo = repository(tmp_path, leaving(SETSID, pid, "sleep 600"))
    cancel = threading.Event()

    def add_then_look() -> object:
        with command.supervised(command.Supervision(cancel)):
            try:
                git.run("worktree", "add", "-b", "task", str(tmp_path / "wt"), cwd=repo)
            except command.Cancelled:
                pass
            else:
                raise AssertionError("the worktree add was not cancelled")
            return git.run("status", cwd=repo)

    thread, outcome = in_thread(add_then_look)
    leftover = pid_in(pid)
    cancel.set()
    thread.join(BOUND)
    assert not thread.is_alive(), "the cancel did not reach the git command"
    [raised] = outcome
    assert isinstance(raised, command.Cancelled) and "not started" in str(raised), raised
    assert not alive(leftover)


#: A runner that dies with ``kill -9`` while its hook runs, bound as the daemon binds it.
DIES = """
import sys
from pathlib import Path
from lane_runner.providers import cgroup
from lane_runner.run import command
from lane_runner.service import leftovers
if sys.argv[4] == "tree":
    cgroup._base = lambda: None
markers = leftovers.markers(sys.argv[2], Path(sys.argv[3]))
with command.supervised(command.Supervision(None, markers)):
    command.run(["/bin/sh", "-c", sys.argv[1]], cwd=Path(sys.argv[3]),
                env={"PATH": "/usr/bin:/bin"}, timeout=600)
"""


def test_what_a_killed_runners_hook_left_is_ended_by_the_next_recovery(
    tmp_path: Path, containment: str, ended: list[Path]
) -> None:
    pid = tmp_path / "leftover.pid"
    ended.append(pid)
    node = f"node-{tmp_path.name}"
    runner = subprocess.Popen(
        [sys.executable, "-c", DIES, leaving(SETSID, pid, "sleep 600"), node, str(tmp_path),
         containment]
    )
    leftover = pid_in(pid)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    assert alive(leftover)  # nothing but a recovery ends it
    leftovers.end(node, tmp_path)
    until(lambda: not alive(leftover), "the recovery to end the hook's leftover")


# -- a real daemon ------------------------------------------------------------------


def with_hook(lane: Lane, script: str, name: str = "reference-transaction") -> None:
    """A hook of the repository: ``reference-transaction`` runs when the worktree's add
    makes the task's branch (the runner's add checks nothing out: no post-checkout)."""
    hook = lane.repo / ".git" / "hooks" / name
    hook.write_text(f"#!/bin/sh\n{script}\n")
    hook.chmod(0o755)


@pytest.mark.parametrize("hooks_run", [True, False], ids=["hooks-let-run", "runner-as-shipped"])
def test_a_daemon_whose_repository_starts_an_indexer_on_checkout_does_the_task(
    lane: Lane, ended: list[Path], hooks_run: bool
) -> None:
    """Let run, the indexer neither holds the run nor outlives its git; as the runner
    ships, its git never starts it at all (issue 47)."""
    pid = lane.root / "indexer.pid"
    ended.append(pid)
    with_hook(lane, leaving(SETSID, pid), "reference-transaction" if hooks_run else "post-checkout")
    if hooks_run:
        lane.extra_env.update(with_repository_hooks())
    task = lane.add("indexed")
    batch = lane.start("--until-idle")
    try:
        assert batch.wait(timeout=BOUND * 2) == 0
    except subprocess.TimeoutExpired:
        raise AssertionError("the run is held in workspace preparation") from None
    assert lane.board.get_task(task.id).status is Status.DONE
    if hooks_run:
        assert not alive(pid_in(pid))
    else:
        assert not pid.exists(), "the runner's git ran the repository's post-checkout hook"


def test_a_daemon_stops_within_its_grace_while_a_git_hook_holds_a_run(
    lane: Lane, ended: list[Path]
) -> None:
    """SIGTERM while ``git worktree add`` waits for a hook that never ends: the daemon
    exits after ``shutdown_grace`` plus the kill, the hook and its ``setsid`` child are
    gone, and the run is left for the next start, not counted as a failure."""
    pid = lane.root / "hook.pid"
    ended.append(pid)
    with_hook(lane, leaving(SETSID, pid, "sleep 900"))
    lane.extra_env.update(with_repository_hooks())
    task = lane.add("held by its hook")
    daemon = lane.start()
    leftover = pid_in(pid)
    daemon.send_signal(signal.SIGTERM)
    try:
        assert daemon.wait(timeout=BOUND) == 0
    except subprocess.TimeoutExpired:
        raise AssertionError("the daemon waits for its git command's hook") from None
    assert not alive(leftover)
    assert not leftovers.find(lane.node(), home=lane.root)
    assert lane.board.get_task(task.id).failure_count == 0
    assert [run.outcome for run in lane.runs(task.id)] == [None]  # claimed: the next start


def test_recover_ends_what_a_killed_daemons_hook_left_running(
    lane: Lane, ended: list[Path]
) -> None:
    pid = lane.root / "hook.pid"
    ended.append(pid)
    lane.write_config(hooks={BOARD: {"before_run": leaving(DOUBLE_FORK, pid, "sleep 600")}})
    lane.add("killed in its hook")
    daemon = lane.start()
    leftover = pid_in(pid)
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    assert alive(leftover)
    recovered = lane.cli("recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    until(lambda: not alive(leftover), "recover to end the hook's leftover")


def test_a_daemon_stops_within_its_grace_while_its_cleanup_waits_for_a_hook(
    lane: Lane, ended: list[Path]
) -> None:
    """No run in flight, only the cleanup sweep, held by a ``before_remove`` hook: the
    shutdown ends it too."""
    pid = lane.root / "hook.pid"
    ended.append(pid)
    lane.add("done, its worktree left")
    assert lane.cli("run", "--until-idle").returncode == 0  # a batch leaves its worktree
    lane.write_config(
        gc_interval=1.0, hooks={BOARD: {"before_remove": leaving(SETSID, pid, "sleep 900")}}
    )
    daemon = lane.start()
    leftover = pid_in(pid)
    daemon.send_signal(signal.SIGTERM)
    try:
        assert daemon.wait(timeout=BOUND) == 0
    except subprocess.TimeoutExpired:
        raise AssertionError("the daemon waits for its cleanup's hook") from None
    assert not alive(leftover)
