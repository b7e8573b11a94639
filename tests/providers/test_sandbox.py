"""Attacks from inside a task under ``isolation = sandbox`` (providers/sandbox.py, egress.py).

A codex-shaped CLI (system Python, nothing of ours) tries what a hostile task would:
read the runner's home and a neighbouring task's worktree, plant a hook in the shared
git directory, connect to PostgreSQL on loopback, leave a process behind; and what a
task must still do: write its worktree, answer through its result file, reach an
allowed host through the egress proxy. Each attack is first run without the sandbox,
as the same worker user, to show it is real there (the test cannot pass by accident
of permissions), then inside it, where it must fail.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane_runner.providers import Classification, run_attempt, sandbox
from lane_runner.providers.egress import Destination
from lane_runner.run import hooks

from .conftest import RequestFactory

WORKER = "nobody"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root"),
    pytest.mark.skipif(sandbox.unavailable(WORKER) is not None,
                       reason=f"no sandbox here: {sandbox.unavailable(WORKER)}"),
]

#: The CLI: reads its prompt, runs the attacks, answers on the stream and in ``-o``.
FAKE_CODEX = r'''#!/usr/bin/python3
import json, os, socket, subprocess, sys
sys.stdin.read()
paths = json.loads(os.environ["ATTACK_PATHS"])
words = []
def attempt(word, action):
    try:
        action()
        words.append(word)
    except Exception:
        pass
attempt("home-read", lambda: open(paths["home_secret"]).read())
attempt("neighbour-read", lambda: open(paths["neighbour_secret"]).read())
attempt("hook-planted", lambda: open(paths["hook"], "w").write("#!/bin/sh\n"))
attempt("config-planted", lambda: open(paths["cli_config"], "a").write("notify = []\n"))
attempt("board-reached", lambda: socket.create_connection(("127.0.0.1", 5432), timeout=3))
attempt("worktree-written", lambda: open("made.txt", "w").write("made\n"))
def through_proxy(target, wanted):
    conn = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    said = b""
    while chunk := conn.recv(4096):  # both ends close: the greeter, or the refusal
        said += chunk
    if wanted not in said.split(b"\r\n")[0]:
        raise OSError(said)
    if wanted == b" 200 " and not said.endswith(b"\r\n\r\nhello"):
        raise OSError("no greeting")
attempt("egress-allowed", lambda: through_proxy(paths["allowed"], b" 200 "))
attempt("egress-refused", lambda: through_proxy("127.0.0.1:5432", b" 403 "))
if paths.get("leave"):
    # double-forked: its parent gone at once, it is nobody's descendant any more
    subprocess.run(["sh", "-c", 'env -i setsid sleep "$0" </dev/null >/dev/null 2>&1 &',
                    paths["leave"]])
answer = {"status": "completed", "summary": " ".join(words) or "nothing",
          "changed_files": [], "tests_run": [], "artifacts": [], "findings": [], "blockers": []}
out = sys.argv[sys.argv.index("-o") + 1]
open(out, "w").write(json.dumps(answer))
print(json.dumps({"type": "thread.started", "thread_id": "00000000-0000-0000-0000-000000000001"}))
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}))
'''


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


@pytest.fixture
def greeter() -> Iterator[int]:
    """A TCP server on loopback that says hello: the allowed host."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"hello")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _postgres_listens() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
    except OSError:
        return False
    return True


def _sleepers(tag: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline == f"sleep\0{tag}\0".encode():
                found.append(int(entry))
    return found


def _layout(root: Path) -> dict[str, Path]:
    """A runner's home with a secret the worker could read, and a repository with two
    tasks' worktrees (the neighbour's holding a secret), all the worker's."""
    user = pwd.getpwnam(WORKER)
    home, repo, worktrees = root / "home", root / "repo", root / "worktrees"
    home.mkdir()
    (home / "config.toml").write_text('board_url = "postgresql://runner:secret@db/x"\n')
    (home / "config.toml").chmod(0o644)  # readable: only the sandbox keeps it out
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    _git("commit", "-q", "--allow-empty", "-m", "init", cwd=repo)
    worktrees.mkdir()
    for task in ("t1", "t2"):
        _git("worktree", "add", "-q", str(worktrees / task), "-b", task, cwd=repo)
    (worktrees / "t2" / "secret.txt").write_text("the neighbour's work\n")
    for path in [repo, worktrees, *repo.rglob("*"), *worktrees.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
    (root / "codex-home").mkdir()
    (root / "codex-home" / "config.toml").write_text("")
    for path in (root / "codex-home", root / "codex-home" / "config.toml"):
        os.chown(path, user.pw_uid, user.pw_gid)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex").write_text(FAKE_CODEX)
    (bin_dir / "codex").chmod(0o755)
    return {"home": home, "repo": repo, "worktree": worktrees / "t1", "bin": bin_dir}


def _attack(make_request: RequestFactory, paths: dict[str, Path], allowed: int,
            isolated: bool, leave: str = "") -> set[str]:
    worktree = paths["worktree"]
    hook = paths["repo"] / ".git" / "hooks" / "post-commit"
    hook.unlink(missing_ok=True)
    req = make_request(
        "codex", executable=paths["bin"] / "codex", workspace=worktree, worktree=worktree,
        run_as=WORKER, isolated=isolated,
        egress_allow=(Destination("127.0.0.1", allowed),),
        result_file=worktree.parent / ".t1.run-1.provider-1.result.json",
        schema_path=paths["home"] / "worker-result.wire.json",
    )
    req.schema_path.write_text("{}")
    req.env["CODEX_HOME"] = str(paths["home"].parent / "codex-home")
    req.env["ATTACK_PATHS"] = json.dumps({
        "home_secret": str(paths["home"] / "config.toml"),
        "neighbour_secret": str(worktree.parent / "t2" / "secret.txt"),
        "hook": str(hook), "cli_config": str(paths["home"].parent / "codex-home" / "config.toml"),
        "allowed": f"127.0.0.1:{allowed}", "leave": leave,
    })
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, (attempt.reason, attempt.tail)
    assert attempt.structured is not None
    return set(str(attempt.structured["summary"]).split())


def test_a_task_in_its_sandbox_reaches_only_its_worktree_and_the_allowed_hosts(
    make_request: RequestFactory, shared_dir: Path, greeter: int
) -> None:
    """Catches: the system bound whole (``--ro-bind / /``: the home and the neighbour
    readable), the common git directory bound writable (a hook planted for every task),
    the CLI's configuration left writable in its home (a command planted for the next
    task of that CLI),
    ``--unshare-net`` dropped (PostgreSQL on loopback reached), the proxy's allow-list
    not checked (127.0.0.1:5432 tunnelled), and the result file's outbox not mounted
    (no answer read: the attempt would fail)."""
    paths = _layout(shared_dir)
    plain = _attack(make_request, paths, greeter, isolated=False)
    expected_outside = {"home-read", "neighbour-read", "hook-planted", "config-planted",
                        "worktree-written"}
    if _postgres_listens():
        expected_outside.add("board-reached")
    assert plain == expected_outside  # the attacks are real without the sandbox
    inside = _attack(make_request, paths, greeter, isolated=True)
    assert inside == {"worktree-written", "egress-allowed", "egress-refused"}
    assert (paths["worktree"] / "made.txt").read_text() == "made\n"
    assert not (paths["repo"] / ".git" / "hooks" / "post-commit").exists()



def test_a_setting_missing_from_the_clis_home_cannot_be_planted_for_the_next_task(
    make_request: RequestFactory, shared_dir: Path, greeter: int
) -> None:
    """The CLI's home is writable in its sandbox (sessions, logins); its settled files
    are bound read-only where they are, and nothing is bound where they are not. Catches:
    the missing ones not made empty (as the worker) before the start: a task writes a
    ``config.toml`` (``notify``: a command) that the next codex started as that worker
    obeys."""
    paths = _layout(shared_dir)
    config = shared_dir / "codex-home" / "config.toml"
    config.unlink()
    assert "config-planted" in _attack(make_request, paths, greeter, isolated=False)
    config.unlink()  # the attack is real without the sandbox
    inside = _attack(make_request, paths, greeter, isolated=True)
    assert "config-planted" not in inside
    assert config.read_text() == ""
    assert config.stat().st_uid == pwd.getpwnam(WORKER).pw_uid  # made as the worker


def test_a_process_left_behind_ends_with_its_attempt_even_without_a_cgroup(
    make_request: RequestFactory, shared_dir: Path, greeter: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool's process that left its session and cleared its environment, with no
    cgroup to find it by: outside the sandbox it outlives the attempt, inside it ends
    with the sandbox's PID namespace. Catches: the PID namespace dropped (the sandbox's
    processes in the runner's), and bwrap not ended with the attempt."""
    monkeypatch.setattr("lane_runner.providers.proctree.AttemptGroup.create",
                        lambda _token: None)
    paths = _layout(shared_dir)
    tag = str(4000 + os.getpid() % 1000)
    try:
        # Outside, the escape races the supervisor's tree walk (a walk in the instant
        # before its parent exits holds it): tried until it escapes once.
        for _ in range(5):
            _attack(make_request, paths, greeter, isolated=False, leave=tag)
            if _sleepers(tag):
                break
        assert _sleepers(tag), "without the sandbox the process outlives its attempt"
        for pid in _sleepers(tag):
            os.kill(pid, signal.SIGKILL)
        _attack(make_request, paths, greeter, isolated=True, leave=tag)
        deadline = time.monotonic() + 10
        while _sleepers(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _sleepers(tag)
    finally:
        for pid in _sleepers(tag):
            os.kill(pid, signal.SIGKILL)


def test_a_worktree_whose_git_file_names_another_tasks_git_directory_is_refused(
    shared_dir: Path,
) -> None:
    """Catches: the ``.git`` file trusted as written (a task that rewrote it would get
    a neighbour's git directory bound writable into its next sandbox)."""
    paths = _layout(shared_dir)
    worktree = paths["worktree"]
    neighbour = paths["repo"] / ".git" / "worktrees" / "t2"
    assert sandbox.git_dirs(worktree) == sandbox.GitDirs(
        paths["repo"] / ".git" / "worktrees" / "t1", paths["repo"] / ".git")
    (worktree / ".git").write_text(f"gitdir: {neighbour}\n")
    with pytest.raises(sandbox.SandboxRefused, match="not this worktree's"):
        sandbox.git_dirs(worktree)


def test_a_hook_runs_in_the_tasks_sandbox(shared_dir: Path) -> None:
    """An operator's hook under ``isolation = sandbox`` (run/hooks.py): it works in the
    worktree, and code the task planted there reaches no more than the task could.
    Catches: a hook run as it is while the attempts are sandboxed (the home read)."""
    paths = _layout(shared_dir)
    facts = hooks.Facts(board="b", task_id="t1", title="t", branch="t1",
                        worktree=paths["worktree"])
    script = (f'cat {paths["home"] / "config.toml"} >/dev/null 2>&1 && echo home-read; '
              f'cat ../t2/secret.txt >/dev/null 2>&1 && echo neighbour-read; '
              "echo hooked > hooked.txt && echo worktree-written")
    table = {"*": {"after_run": script}}
    outside = hooks.run(table, "after_run", facts, owner=WORKER, egress=None)
    inside = hooks.run(table, "after_run", facts, owner=WORKER, egress=())
    assert outside is not None and inside is not None and inside.ok
    assert set(outside.output.split()) == {"home-read", "neighbour-read", "worktree-written"}
    assert inside.output.split() == ["worktree-written"]
    assert (paths["worktree"] / "hooked.txt").read_text() == "hooked\n"
