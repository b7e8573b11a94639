"""The task's branch written into its new clone, without the repository's filters.

A checkout runs the smudge filters the attributes name and the configuration defines,
and the ``post-checkout`` hook: code a task could plant for the next one's checkout
(issue 47). So the runner clones with ``--no-checkout`` (``run/taskgit.py``) and writes
the files itself (``write``), before the clone is renamed into place: a runner killed
before they are written leaves no worktree missing files.

The files are written by ``git read-tree -m -u`` against a git directory of the runner's
own (``_shadow``: created for the call, not writable by the worker): its configuration
is empty, so whatever filter an attribute names has no driver, and no hook or fsmonitor
is set; the objects are the clone's (``GIT_OBJECT_DIRECTORY``, with the repository's
through its alternates) and the index is the clone's (``GIT_INDEX_FILE``). git's own
conversions an attribute asks for (``eol``, ``working-tree-encoding``) still apply: they
run no program. A repository that relies on a filter (Git LFS) gets its blobs as they
are stored (the LFS pointers), and the runner's staging (``run/snapshot.py``) commits
them as they are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from lane_runner.run import git


def write(
    worktree: Path, head: str, object_format: str, owner: str | None
) -> subprocess.CompletedProcess[str]:
    """Write commit ``head``'s files into the new clone ``worktree`` (its HEAD) and its
    index; git's result. The clone was just made by the runner, so its index and objects
    are where ``git clone`` puts them (``.git/index``, ``.git/objects``): no git call asks."""
    git_dir = worktree.absolute() / ".git"
    shadow = _shadow(object_format)
    try:
        env = {"GIT_DIR": str(shadow), "GIT_WORK_TREE": str(worktree.absolute()),
               "GIT_INDEX_FILE": str(git_dir / "index"),
               "GIT_OBJECT_DIRECTORY": str(git_dir / "objects")}
        written = git.run("-c", f"safe.directory={shadow}", "read-tree", "-m", "-u", head,
                          cwd=worktree, owner=owner, env=env)
    finally:
        shutil.rmtree(shadow, ignore_errors=True)
    return written


def _shadow(object_format: str) -> Path:
    """A git directory with nothing in it but what git needs to find one: readable by the
    worker, writable by the runner alone (0755 in the system's temporary folder)."""
    shadow = Path(tempfile.mkdtemp(prefix="lane-runner-checkout-"))
    (shadow / "refs").mkdir()
    (shadow / "objects").mkdir()
    (shadow / "HEAD").write_text("ref: refs/heads/main\n")
    extensions = f"[extensions]\n\tobjectFormat = {object_format}\n"
    version = 1 if object_format != "sha1" else 0
    (shadow / "config").write_text(
        f"[core]\n\trepositoryformatversion = {version}\n"
        + (extensions if version else "")
    )
    # Modes set, not left to the umask: the systemd unit's UMask=0077 made HEAD and config
    # root's alone, and the worker's read-tree found no repository (the pods' test saw it).
    for path in (shadow, shadow / "refs", shadow / "objects"):
        os.chmod(path, 0o755)
    for path in (shadow / "HEAD", shadow / "config"):
        os.chmod(path, 0o644)
    return shadow
