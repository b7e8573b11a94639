"""One attempt, one sandbox: what a CLI's process tree can see and reach (docs/security.md).

Under ``isolation = sandbox`` each start of a CLI runs in bubblewrap (``bwrap``) with
namespaces of its own:

- **mounts**: an empty root holding the system read-only (``/usr``, ``/etc`` and the
  merged-``/usr`` links), the CLI's own install read-only, the task's worktree and its
  own git directory writable (a clone's ``.git``, ``run/taskgit.py``, with the
  repository's object store it shares read-only, ``shared_objects``; for a linked
  worktree an older runner made, ``<common>/worktrees/<name>`` writable and the
  repository's shared git directory read-only), the CLI's config home
  writable (the adapter's ``writable_homes``: sessions, logins), and the files the
  runner hands the CLI (the wire schema, claude's settings) as read-only copies. A
  fresh ``/tmp``, ``/proc`` and ``/dev``. Nothing of the runner's home, the other
  tasks' worktrees or the rest of the worker's home is there;
- **processes**: a PID namespace whose first process is bwrap's, so when the CLI
  ends every process it left ends with it (and ``--die-with-parent`` ends it all if
  the daemon dies);
- **network**: only loopback; the one way out is ``egress.py``'s proxy on a unix
  socket bound in, reached through a forwarder on ``127.0.0.1:PROXY_PORT`` that the
  CLI finds in ``HTTPS_PROXY``/``HTTP_PROXY``.

bwrap runs as the worker user (``setpriv``, after the launcher has moved itself into
the attempt's cgroup, ``proctree.launch``), so it creates an unprivileged user
namespace and can bind nothing the worker could not read anyway: a path planted in
the worktree cannot widen the sandbox past the worker's own reach. The one thing read
from the worktree, its ``.git`` file, is read through ``files.py`` and must name a git
directory that names the worktree back.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lane_runner import files
from lane_runner.providers.egress import Destination, EgressProxy

log = logging.getLogger(__name__)

NONE, USER, SANDBOX = "none", "user", "sandbox"
ISOLATIONS = (NONE, USER, SANDBOX)
#: The loopback port the forwarder listens on inside the sandbox (its own network).
PROXY_PORT = 3128
#: Where the proxy's socket is bound inside the sandbox.
INSIDE_SOCKET = "/run/lane-runner/egress.sock"
#: The system's read-only part; on a merged-/usr system the others are links into /usr.
SYSTEM = ("/usr", "/etc")
LINKED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The longest ``.git`` file or ``gitdir`` file read.
GIT_FILE_LIMIT = 4096
#: The most object stores a clone's ``alternates`` may name for the sandbox to mount.
MAX_ALTERNATES = 4
PROBE_TIMEOUT = 30.0
_PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY",
                    "all_proxy")
_NO_PROXY = ("NO_PROXY", "no_proxy")

#: The forwarder (system Python, standard library): listens on the loopback port, then
#: forks; the child carries each connection to the proxy's socket, the parent becomes
#: the CLI. When the CLI ends, bwrap ends and the namespace's processes with it.
FORWARDER = r"""
import os, socket, sys, threading
port, path, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def carry(conn):
    out = socket.socket(socket.AF_UNIX)
    try:
        out.connect(path)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pump, args=(out, conn), daemon=True).start()
    pump(conn, out)
if os.fork() == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=carry, args=(conn,), daemon=True).start()
os.execvp(argv[0], argv)
"""


def choose(configured: str | None, worker_user: str | None,
           unavailable: str | None) -> tuple[str, str]:
    """The isolation that applies, and why (pure): ``configured`` when set, else
    ``sandbox`` where it is available, else ``user`` with a worker user, else ``none``."""
    if configured:
        why = "set in the configuration"
        if configured == SANDBOX and unavailable:
            why += f", but unavailable here: {unavailable}"
        return configured, why
    if unavailable is None:
        return SANDBOX, "bwrap and user namespaces are available (the default)"
    fallback = USER if worker_user else NONE
    return fallback, f"the sandbox is unavailable ({unavailable})" + (
        "; the CLIs run as worker_user" if worker_user else "; no worker_user is set")


def python() -> str | None:
    """A system Python for the forwarder: the runner's own may live where the worker
    cannot reach (a venv in root's home)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3",
                      os.path.realpath(sys.executable)):
        if candidate.startswith(("/usr/", "/bin/")) and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.cache
def unavailable(run_as: str | None) -> str | None:
    """Why no sandbox can be made here for ``run_as``, or None (probed once per user)."""
    bwrap, interpreter = shutil.which("bwrap"), python()
    if bwrap is None:
        return "bwrap is not installed (Debian: apt-get install bubblewrap)"
    if interpreter is None:
        return "no system python3 under /usr for the sandbox's forwarder"
    if run_as and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    argv = [*_as_user(run_as), bwrap, "--unshare-all", "--die-with-parent",
            *_system(), "--proc", "/proc", "--dev", "/dev", "--", interpreter, "-c", ""]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              cwd="/", env={"PATH": os.defpath})
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap cannot run: {error}"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        return f"bwrap refused a sandbox: {said[-1] if said else done.returncode}"
    return None


def _as_user(run_as: str | None) -> list[str]:
    """``setpriv`` switching to ``run_as`` with no supplementary groups (none: nothing)."""
    if not run_as:
        return []
    entry = pwd.getpwnam(run_as)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
            "--clear-groups", "--"]


def _system() -> list[str]:
    args: list[str] = []
    for path in SYSTEM:
        args += ["--ro-bind", path, path]
    for path in LINKED:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def install_of(executable: Path) -> list[Path]:
    """What a CLI needs to run, read-only: the directories of its path and of its real
    path, each widened to the ``node_modules`` it lies in (an npm install's launcher
    reaches its sibling packages)."""
    found: list[Path] = []
    for path in (executable, Path(os.path.realpath(executable))):
        parts = path.parent.parts
        top = parts.index("node_modules") + 1 if "node_modules" in parts else len(parts)
        place = Path(*parts[:top])
        if not any(place.is_relative_to(other) for other in found):
            found.append(place)
    return found


@dataclass(frozen=True)
class GitDirs:
    """The task's git directories: its own (writable) and the shared one (read-only)."""

    own: Path
    common: Path


class SandboxRefused(Exception):
    """The attempt cannot be sandboxed as asked; the words say why."""


def git_dirs(worktree: Path) -> GitDirs | None:
    """The git directories of ``worktree`` when its ``.git`` is a file naming a linked
    worktree's directory that names the worktree back; None when ``.git`` is a folder
    or absent (it is inside the worktree then, or there is none). SandboxRefused when
    the two disagree: a ``.git`` planted to reach another task's git directory."""
    dot_git = worktree / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink():
        return None
    try:
        text = files.read_workers(dot_git, GIT_FILE_LIMIT).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise SandboxRefused(f"{dot_git} unreadable: {error}") from None
    if not text.startswith("gitdir:"):
        raise SandboxRefused(f"{dot_git} does not name a git directory")
    own = Path(os.path.normpath(worktree / text[len("gitdir:"):].strip()))
    try:
        back = files.read_workers(own / "gitdir", GIT_FILE_LIMIT).decode("utf-8", "replace")
    except OSError as error:
        raise SandboxRefused(f"{own}/gitdir unreadable: {error}") from None
    if own.parent.name != "worktrees" or Path(os.path.normpath(back.strip())) != dot_git:
        raise SandboxRefused(f"{dot_git} names {own}, which is not this worktree's")
    return GitDirs(own, own.parent.parent)


def shared_objects(worktree: Path) -> list[Path]:
    """The object stores a task's clone (``run/taskgit.py``: its ``.git`` a directory)
    reads through its ``objects/info/alternates``: the repository's, mounted read-only.
    bwrap runs as the worker, so an alternate the task wrote there binds nothing the
    worker could not read anyway; at most ``MAX_ALTERNATES`` absolute directories."""
    dot_git = worktree / ".git"
    if not dot_git.is_dir() or dot_git.is_symlink():
        return []
    try:
        text = files.read_workers(dot_git / "objects" / "info" / "alternates", GIT_FILE_LIMIT)
    except OSError:
        return []
    named = text[:GIT_FILE_LIMIT].decode("utf-8", "replace").splitlines()[:MAX_ALTERNATES]
    return [Path(os.path.normpath(line)) for line in named
            if os.path.isabs(line) and os.path.isdir(line)]


@dataclass
class Layout:
    """What one sandbox holds, by path (the same path inside as outside)."""

    cwd: Path
    writable: list[Path] = field(default_factory=list)
    writable_if_there: list[Path] = field(default_factory=list)
    readable: list[Path] = field(default_factory=list)
    readable_if_there: list[Path] = field(default_factory=list)
    copies: dict[Path, Path] = field(default_factory=dict)
    """Inside path -> a read-only copy outside (files the worker cannot reach itself)."""
    mounted: dict[Path, Path] = field(default_factory=dict)
    """Inside path -> the writable directory outside mounted there (the outbox)."""
    directories: list[Path] = field(default_factory=list)
    """Empty directories made inside (the worker's home)."""


def bwrap_argv(bwrap: str, layout: Layout, socket_path: Path, interpreter: str,
               argv: Sequence[str]) -> list[str]:
    """The bwrap command line that runs ``argv`` in ``layout`` (pure). Mounts go on
    shallowest first, so a worktree lands inside the outbox or home mounted above it."""
    mounts: list[tuple[Path, list[str]]] = []
    mounts += [(path, ["--dir", str(path)]) for path in layout.directories]
    mounts += [(path, ["--ro-bind", str(path), str(path)]) for path in layout.readable]
    mounts += [(path, ["--bind", str(path), str(path)]) for path in layout.writable]
    mounts += [(path, ["--bind-try", str(path), str(path)]) for path in layout.writable_if_there]
    mounts += [(path, ["--ro-bind-try", str(path), str(path)])
               for path in layout.readable_if_there]
    mounts += [(path, ["--bind", str(out), str(path)]) for path, out in layout.mounted.items()]
    mounts += [(path, ["--ro-bind", str(copy), str(path)]) for path, copy in layout.copies.items()]
    mounts.sort(key=lambda mount: len(mount[0].parts))
    return [
        bwrap, "--unshare-all", "--die-with-parent", "--new-session",
        *_system(), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        *(arg for _, args in mounts for arg in args),
        "--ro-bind", str(socket_path), INSIDE_SOCKET,
        "--chdir", str(layout.cwd),
        "--", interpreter, "-c", FORWARDER, str(PROXY_PORT), INSIDE_SOCKET, *argv,
    ]


def proxied(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with every request sent to the forwarder, and no host exempted."""
    url = f"http://127.0.0.1:{PROXY_PORT}"
    kept = {name: value for name, value in env.items() if name not in _NO_PROXY}
    return {**kept, **dict.fromkeys(_PROXY_VARIABLES, url)}


@dataclass
class Started:
    """A command ready to start: ``argv`` with ``env``, as ``run_as`` (None: the
    runner's own user; a sandboxed command switches user itself)."""

    argv: list[str]
    env: dict[str, str]
    run_as: str | None
    outbox: Path | None = None
    mounted_at: Path | None = None

    def outside(self, inside: Path) -> Path:
        """Where a file the CLI wrote at ``inside`` (its result file) is found."""
        if self.outbox is not None and inside.parent == self.mounted_at:
            return self.outbox / inside.name
        return inside


@dataclass(frozen=True)
class Request:
    """What a sandbox is made of for one start of a CLI."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    worktree: Path
    executable: Path
    run_as: str | None
    allow: Sequence[Destination]
    writable_homes: Sequence[Path] = ()
    settled: Sequence[Path] = ()
    """Paths in those homes kept read-only (the CLI's configuration and hooks)."""
    handed: Sequence[Path] = ()
    """Files the runner hands the CLI by path (schema, settings): copied in read-only."""
    result_dir: Path | None = None
    """Where the CLI's result file goes: an outbox of the attempt's own is mounted there."""


@contextlib.contextmanager
def sandboxed(
    request: Request, on_refused: Callable[[str], None] | None = None
) -> Iterator[Started]:
    """``request`` wrapped in bwrap with its egress proxy running; everything the
    sandbox needed outside (the proxy, the outbox, the copies) goes when it ends.
    SandboxRefused when the worktree's git directories cannot be trusted."""
    interpreter = python()
    if interpreter is None:
        raise SandboxRefused("no system python3 under /usr for the sandbox's forwarder")
    owner = _owner(request.run_as)
    place = Path(tempfile.mkdtemp(prefix="lane-sandbox-"))
    proxy: EgressProxy | None = None
    try:
        layout = _layout(request, place, owner)
        proxy = EgressProxy(place / "egress.sock", request.allow, on_refused).start(owner)
        bwrap = shutil.which("bwrap") or "bwrap"
        argv = [*_as_user(request.run_as),
                *bwrap_argv(bwrap, layout, proxy.path, interpreter, request.argv)]
        outbox = place / "out" if request.result_dir is not None else None
        yield Started(argv, proxied(request.env), None, outbox, request.result_dir)
    finally:
        if proxy is not None:
            proxy.close()
        shutil.rmtree(place, ignore_errors=True)


def _owner(run_as: str | None) -> tuple[int, int] | None:
    if not run_as:
        return None
    entry = pwd.getpwnam(run_as)
    return entry.pw_uid, entry.pw_gid


def _layout(request: Request, place: Path, owner: tuple[int, int] | None) -> Layout:
    """The sandbox's paths for ``request``; its outbox and copies made in ``place``."""
    layout = Layout(cwd=request.cwd, writable=[request.worktree])
    dirs = git_dirs(request.worktree)
    if dirs is not None:
        layout.readable.append(dirs.common)
        layout.writable.append(dirs.own)
    layout.readable += shared_objects(request.worktree)
    layout.readable += [path for path in install_of(request.executable)
                        if not any(path.is_relative_to(s) for s in SYSTEM)]
    home = request.env.get("HOME")
    if home:
        layout.directories.append(Path(home))
    layout.writable_if_there += list(request.writable_homes)
    layout.readable_if_there += list(request.settled)
    for path in request.handed:
        copy = place / f"handed-{len(layout.copies)}"
        shutil.copyfile(path, copy)
        os.chmod(copy, 0o644)
        layout.copies[path] = copy
    if request.result_dir is not None:
        outbox = place / "out"
        outbox.mkdir(mode=0o700)
        if owner is not None:
            os.chown(outbox, *owner)
        layout.mounted[request.result_dir] = outbox
    os.chmod(place, 0o711)  # the worker's bwrap passes through; it lists and changes nothing
    return layout
