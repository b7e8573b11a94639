"""A network namespace with nothing but loopback, for the real CLIs' runs.

The scripted model server is the namespace's first process (``unshare --net``) and
brings ``lo`` up; the daemon joins it (``nsenter --net``), and the CLIs the daemon
starts, as the worker user, inherit it. No interface but ``lo`` exists there, so a
CLI reaches the scripted server and nothing else: not the internet, not the host's
own services on its loopback.

As root the namespace is a plain one, so the daemon keeps its power to switch to
the worker user. Unprivileged, it is owned by a user namespace of our own that maps
only our uid (``--map-current-user``), and joining takes both namespaces.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def _privileged() -> bool:
    return os.geteuid() == 0


def unavailable() -> str | None:
    """Why this host cannot give a process a network namespace of its own, or None."""
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) is not installed"
    try:
        done = subprocess.run(isolated(["true"]), capture_output=True, text=True, timeout=30)
    except OSError as error:
        return f"unshare cannot run: {error}"
    if done.returncode != 0:
        return f"this host refuses a network namespace: {done.stderr.strip() or done.returncode}"
    return None


def isolated(argv: list[str]) -> list[str]:
    """``argv`` as the first process of a new network namespace."""
    users = [] if _privileged() else ["--map-current-user"]
    return ["unshare", "--net", *users, "--", *argv]


def joined(pid: int, argv: list[str]) -> list[str]:
    """``argv`` run inside the network namespace of process ``pid`` (nsenter execs it,
    so the process started is ``argv`` itself: a signal to it reaches it)."""
    users = [] if _privileged() else ["--user", "--preserve-credentials"]
    return ["nsenter", f"--target={pid}", *users, "--net", "--", *argv]
