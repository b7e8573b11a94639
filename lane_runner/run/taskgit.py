"""A task's own git directory: a clone of its repository sharing the objects (issue 47).

A linked worktree (``git worktree add``) shares its repository's configuration, hooks,
``info/`` and refs with every other task of the repository, so one task could plant code
for the next, or move another's branch (docs/security.md). So each task works in a clone
of its own (``clone``: ``git clone --shared --no-checkout``): its objects read from the
repository's store through ``objects/info/alternates``, its configuration, hooks, refs
and index its own, its ``.git`` a directory inside the worktree. The sandbox mounts the
worktree (and so that git directory) writable and the repository's object store
read-only: an agent commits there with git as usual, and reaches nothing of another task.

The repository stays where a task's result lives: once the runner has made (or found)
the result's commit in the clone, it fetches that very commit into the task's branch of
the repository (``publish``), from where the push and the cleanup read it. The repository
knows its tasks' clones by a registry of its own (``<common>/lane-runner-clones/``: one
file per clone naming its branch and path, written by the runner), which is how another
home finds a dead runner's clone to take over, and how the runner finds a clone's
repository again (``repository_of``: the clone's ``alternates`` names it, and the
repository's registry must name the clone back: a task that rewrites its alternates
cannot make the runner publish into, or push from, another repository).

A clone is made in a staging directory beside the worktree and renamed into place once
its files are written: a runner killed half-way leaves only the staging directory, which
the next clone removes, never a worktree missing files.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from lane_runner import files
from lane_runner.errors import LaneRunnerError
from lane_runner.run import checkout, command, git

log = logging.getLogger(__name__)

#: The repository's registry of its tasks' clones, in its common git directory.
REGISTRY = "lane-runner-clones"
#: Where a clone's git directory names the object stores it shares.
ALTERNATES = Path("objects", "info", "alternates")
#: The longest registry entry or ``alternates`` file read.
MAX_ENTRY_BYTES = 8192
#: What ``git clone`` is given: no checkout (``run/checkout.py`` writes the files without
#: filters), the objects shared, no tags or other branches, and no template (no sample
#: hooks, nothing from ``init.templateDir``).
CLONE = ("clone", "--quiet", "--shared", "--no-checkout", "--single-branch", "--no-tags",
         "--template=")


#: What git says when the repository's refs include a worktree being made: ``git
#: worktree add`` writes the new worktree's ``HEAD`` as a placeholder (the null object id)
#: before it points it at its branch, and a fetch's connectivity walk (every ref and
#: every worktree's ``HEAD``) reads that placeholder as "bad object worktrees/<name>/HEAD".
HALF_MADE_WORKTREE = "bad object worktrees/"
#: Seconds between fetches that met a worktree being made (by this runner, Hermes's
#: ``worktree`` workspaces or anyone's git), one pause per try: about three seconds in all.
HALF_MADE_PAUSES = (0.1, 0.2, 0.4, 0.8, 1.6)


class PublishError(LaneRunnerError):
    """The result's commit could not be put on the task's branch of the repository."""


@dataclass(frozen=True)
class Entry:
    """One clone the repository's registry names: its worktree and its branch."""

    worktree: Path
    branch: str


def is_clone(worktree: Path) -> bool:
    """Whether ``worktree`` is a clone sharing a repository's objects: a ``.git`` directory
    (not the ``.git`` file of a linked worktree an older runner made) with alternates (a
    repository of its own, a hosting board's folder, has none: its branches are its own)."""
    dot_git = worktree / ".git"
    return (dot_git.is_dir() and not dot_git.is_symlink()
            and os.path.lexists(dot_git / ALTERNATES))


@dataclass(frozen=True)
class Start:
    """Where a new clone starts: the task's branch, at ``commit``, in a repository whose
    objects are named in ``object_format`` (``sha1``, ``sha256``)."""

    branch: str
    commit: str
    object_format: str


def clone(top: Path, common: Path, worktree: Path, start: Start,
          owner: str | None) -> subprocess.CompletedProcess[str]:
    """Clone the repository at ``top`` into ``worktree`` on ``start``'s branch at its
    commit, its files written, registered in ``common``; git's result (a failure leaves
    nothing at ``worktree``). The repository gets the branch at that commit too when it has
    no such branch yet, as a linked worktree's add made it: the task's branch is listed
    there from the start, and its name is taken (``workspace._branch_for``)."""
    branch = start.branch
    staging = worktree.parent / f".{worktree.name}.cloning"
    discard(staging)
    made = git.run("update-ref", f"refs/heads/{branch}", start.commit, "", cwd=top,
                   owner=owner)
    if made.returncode != 0 and not _has(top, branch, owner):
        return made
    made = git.run(*CLONE, "--", str(top), str(staging), cwd=worktree.parent, owner=owner)
    steps = (
        ("symbolic-ref", "HEAD", f"refs/heads/{branch}"),
        ("update-ref", f"refs/heads/{branch}", start.commit),
    )
    for step in steps:
        if made.returncode != 0:
            break
        made = git.run(*step, cwd=staging, owner=owner)
    if made.returncode == 0:
        made = checkout.write(staging, start.commit, start.object_format, owner)
    if made.returncode != 0:
        discard(staging)
        return made
    os.rename(staging, worktree)
    register(common, worktree, branch, owner)
    return made


def _has(top: Path, branch: str, owner: str | None) -> bool:
    said = git.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=top,
                   owner=owner)
    return said.returncode == 0


def discard(directory: Path) -> None:
    """Remove ``directory`` (a clone, or a staging one a killed runner left); its links
    are removed, never followed. It is renamed aside first: the git a killed runner was
    running outlives it (git runs in a session of its own) and may still be writing
    there, so whatever such a git adds after the rename lands aside, never in the way
    of the name; what cannot be removed stays aside, and the log says so."""
    if not os.path.lexists(directory):
        return
    aside = directory.with_name(f"{directory.name}-discarded-{time.time_ns()}")
    os.rename(directory, aside)
    shutil.rmtree(aside, ignore_errors=True)
    if os.path.lexists(aside):
        log.warning("%s could not be removed whole (a git still writing there?): left at %s",
                    directory, aside)


def _key(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _entry_name(worktree: Path, branch: str) -> str:
    """``<worktree key>-<branch key>``: the names say whose and which branch each entry
    is, so finding a clone or a branch's holder reads only the entries it names (issue
    46: every entry was read, twice per task, and they grow with the clones a
    repository keeps). An entry an older runner wrote is ``<worktree key>`` alone."""
    return f"{_key(str(worktree.absolute()), 32)}-{_key(branch, 16)}"


def _names(registry: Path) -> list[str]:
    try:
        return sorted(os.listdir(registry))
    except OSError:
        return []


def _of_worktree(names: list[str], worktree: Path) -> list[str]:
    key = _key(str(worktree.absolute()), 32)
    return [name for name in names if name == key or name.startswith(f"{key}-")]


def register(common: Path, worktree: Path, branch: str, owner: str | None) -> None:
    """Record in the repository that ``worktree`` is a clone of it working on ``branch``
    (what it recorded of another branch before is forgotten)."""
    registry = common / REGISTRY
    files.ensure_directory(registry, 0o755)
    name = _entry_name(worktree, branch)
    entry = registry / name
    files.write(entry, f"{branch}\n{worktree.absolute()}\n".encode(), mode=0o644)
    for stale in _of_worktree(_names(registry), worktree):
        if stale != name:
            with contextlib.suppress(FileNotFoundError):
                (registry / stale).unlink()
    if owner is not None:  # the repository is the worker's: so is what the runner adds to it
        user = pwd.getpwnam(owner)
        for path in (registry, entry):
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def unregister(common: Path, worktree: Path) -> None:
    """Forget ``worktree`` in the repository's registry."""
    registry = common / REGISTRY
    for name in _of_worktree(_names(registry), worktree):
        with contextlib.suppress(FileNotFoundError):
            (registry / name).unlink()


def entries(common: Path, branch: str | None = None) -> list[Entry]:
    """The clones the repository's registry names; with ``branch``, only those that may be
    on it (an older runner's entries, whose names do not say, are read too). An entry it
    cannot read is skipped: the worker can write them (``files.read_workers``)."""
    registry = common / REGISTRY
    names = _names(registry)
    if branch is not None:
        suffix = f"-{_key(branch, 16)}"
        names = [name for name in names if name.endswith(suffix) or "-" not in name]
    return [found for name in names if (found := _read_entry(registry / name)) is not None]


def _read_entry(path: Path) -> Entry | None:
    try:
        text = files.read_workers(path, MAX_ENTRY_BYTES)[:MAX_ENTRY_BYTES]
    except OSError:
        return None
    lines = text.decode(errors="replace").splitlines()
    if len(lines) >= 2 and lines[0] and os.path.isabs(lines[1]):
        return Entry(Path(lines[1]), lines[0])
    return None


def holder(common: Path, branch: str, worktree: Path) -> Path | None:
    """Another clone of the repository working on ``branch`` (a dead runner's, another
    home's); an entry whose clone is gone is forgotten on the way."""
    for entry in entries(common, branch):
        if entry.branch != branch or entry.worktree == worktree.absolute():
            continue
        if is_clone(entry.worktree) and repository_of(entry.worktree) == common:
            return entry.worktree
        log.info("the clone %s of %s is gone: forgotten", entry.worktree, branch)
        unregister(common, entry.worktree)
    return None


def repository_of(worktree: Path) -> Path | None:
    """The common git directory of the repository ``worktree`` is a clone of: the one its
    ``alternates`` names, when that repository's registry names the clone back; None
    for a linked worktree, or a clone whose repository cannot be told."""
    if not is_clone(worktree):
        return None
    try:
        text = files.read_workers(worktree / ".git" / ALTERNATES,
                                  MAX_ENTRY_BYTES)[:MAX_ENTRY_BYTES]
    except OSError:
        return None
    lines = text.decode(errors="replace").splitlines()
    if not lines or not os.path.isabs(lines[0]):
        return None
    common = Path(os.path.normpath(lines[0])).parent
    registry = common / REGISTRY
    for name in _of_worktree(_names(registry), worktree):
        entry = _read_entry(registry / name)
        if entry is not None and entry.worktree == worktree.absolute():
            return common
    return None


def branches_of(worktree: Path) -> Path:
    """Where the task's branch that counts is: the repository a clone publishes into, or
    the worktree itself (a linked worktree's branch is the repository's). A clone whose
    repository cannot be told is the worktree too: what is read there is its own."""
    return repository_of(worktree) or worktree


def publish(worktree: Path, branch: str, commit: str, owner: str | None) -> None:
    """Put ``commit`` (made or found in the clone ``worktree``) on ``branch`` of its
    repository; nothing for a linked worktree, whose commits are the repository's.

    The commit is fetched by its id, so what the task did to its own refs meanwhile does
    not matter, and the repository's branch is set to it (forced: the task's branch is the
    task's, as it was when tasks committed into the repository directly). The upload side
    runs in the clone, which the task writes: ``--upload-pack`` is given, and the
    runner's ``NEUTRAL`` settings reach it (``run/git.py``).
    """
    if not is_clone(worktree):
        return
    common = repository_of(worktree)
    if common is None:
        raise PublishError(
            f"{worktree}'s git directory no longer names the repository it was cloned from "
            "(its objects/info/alternates was changed, or the repository forgot it)"
        )
    fetched = _fetch(common, worktree, branch, commit, owner)
    if fetched.returncode != 0:
        said = fetched.stderr.strip() or f"exit status {fetched.returncode}"
        raise PublishError(f"the repository {common} did not take {commit[:12]} on {branch}: "
                           f"git said: {said}")
    now = git.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                  cwd=common, owner=owner).stdout.strip()
    if now != commit:
        raise PublishError(f"branch {branch} of {common} is at {now or 'nothing'} after the "
                           f"runner put {commit[:12]} there")


def _fetch(common: Path, worktree: Path, branch: str, commit: str,
           owner: str | None) -> subprocess.CompletedProcess[str]:
    """``commit`` fetched from the clone into ``branch`` of ``common``; fetched again while
    git meets a worktree of the repository half-made (``HALF_MADE_WORKTREE``), which is
    over in milliseconds: the hand-off of a result is not failed for another's ``git
    worktree add`` (Hermes's own dispatcher makes them without the runner's lock)."""
    argv = ("fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
            "--no-recurse-submodules", "--upload-pack=git-upload-pack", "--",
            str((worktree / ".git").absolute()), f"+{commit}:refs/heads/{branch}")
    fetched = git.run(*argv, cwd=common, owner=owner)
    for pause in HALF_MADE_PAUSES:
        if fetched.returncode == 0 or HALF_MADE_WORKTREE not in fetched.stderr:
            break
        log.info("%s: a worktree of %s is being made (%s); fetching again in %.1f s",
                 worktree, common, fetched.stderr.strip().splitlines()[0], pause)
        time.sleep(pause)
        fetched = git.run(*argv, cwd=common, owner=owner)
    return fetched


def remove(worktree: Path) -> None:
    """Remove the clone ``worktree`` and forget it in its repository's registry."""
    common = repository_of(worktree)
    discard(worktree)
    if common is not None:
        unregister(common, worktree)


def move(common: Path, holder_path: Path, worktree: Path, branch: str,
         owner: str | None) -> str | None:
    """Move the clone at ``holder_path`` to ``worktree`` (as ``owner``, who can move only
    what it could itself), registered there; None when moved, else why not."""
    with contextlib.suppress(FileNotFoundError, OSError):
        worktree.rmdir()  # an empty leftover directory: mv would move *into* it
    moved = command.run(["mv", "-T", "--", str(holder_path), str(worktree.absolute())],
                        cwd=worktree.parent, env=git.environment(owner),
                        timeout=git.GIT_TIMEOUT, owner=owner)
    if moved.returncode != 0:
        return moved.stderr.strip() or f"exit status {moved.returncode}"
    unregister(common, holder_path)
    register(common, worktree, branch, owner)
    return None
