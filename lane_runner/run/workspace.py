"""The git worktree a task works in.

Each task gets ``worktrees/<board>/<task>`` on branch ``lane/<board>/<task>``: a clone of
its repository with a git directory of its own (``run/taskgit.py``), created once under
its repository's lock and reused when the task resumes; an earlier run's worktree
holding the branch is taken over (``run/takeover.py``). A workspace
that names a folder of its repository (a monorepo's ``repo/service-a``) gets the
whole repository's worktree, and the CLI works in that folder of it.

With a worker user (``owner``) the worktree is that user's: git runs as it, so the
CLI can edit and commit there, and the daemon never runs git where another user
controls the configuration (git's own ``safe.directory`` concern).
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from lane_runner import files
from lane_runner.errors import LaneRunnerError
from lane_runner.run import git, interrupted, ownership, refs, snapshot, takeover, taskgit

log = logging.getLogger(__name__)
GIT_TIMEOUT = git.GIT_TIMEOUT
DUBIOUS_OWNERSHIP = "detected dubious ownership"
#: What git says when a branch cannot be made because another is named like one of its
#: folders ("'refs/heads/lane/work' exists; cannot create 'refs/heads/lane/work/t1'").
FOLDER_TAKEN = "exists; cannot create"
#: One ``git worktree add`` at a time per repository (keyed by git's common directory,
#: which its worktrees share), so a slow git in one repository never holds up another.
#: Other runner processes are kept out of the home by its lock.
_REPOSITORY_LOCKS: dict[Path, threading.Lock] = {}
_REPOSITORY_LOCKS_GUARD = threading.Lock()


def creating(repository: Path, owner: str | None = None) -> threading.Lock:
    """Held while a worktree of ``repository`` is made, by ``prepare`` or by a host's own
    code (Hermes's ``worktree`` kind): git's worktree metadata is the repository's."""
    located = _locate(repository, owner) if repository.is_dir() else None
    return _repository_lock(located.common if located else repository.resolve())


class WorkspaceError(LaneRunnerError):
    """The task has no usable git workspace; the message says how to give it one."""


def _git(*args: str, cwd: Path, owner: str | None = None) -> subprocess.CompletedProcess[str]:
    """git as the daemon, or as ``owner`` with that user's HOME (``run/git.py``)."""
    return git.run(*args, cwd=cwd, owner=owner, timeout=GIT_TIMEOUT)


def twin_of(branch: str) -> str:
    """The flat name a task works on when git cannot have ``branch``: ``lane-<board>-<task>``.

    A ref cannot be a file and a folder at once, so a branch named ``lane/<board>`` (or
    ``lane``) leaves no room for ``lane/<board>/<task>``; one path component has no folder
    to collide with. The twin of a name git accepts is one git accepts too.
    """
    return branch.replace("/", "-")


def branch_name(board: str, task_id: str) -> str:
    """``lane/<board>/<task>``, or a hashed form when git would refuse that name."""
    name = f"lane/{board}/{task_id}"
    if git_accepts(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"lane/{board.strip('.-') or 'board'}/task-{digest}"


def git_accepts(name: str) -> bool:
    """git's branch-name rules, for names built from board and task ids.

    Those ids hold only ``[A-Za-z0-9_.-]``, so of ``git check-ref-format``'s rules
    only the ones about dots can bite (a test holds this against git itself).
    """
    parts_ok = all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/")
    )
    return parts_ok and ".." not in name and not name.endswith(".")


def repository_of(directory: Path, owner: str | None = None) -> Path | None:
    """The top of the git repository ``directory`` is in, as ``owner``'s git sees it; None
    outside any. A repository git refuses to ``owner`` (another user's) is a
    ``WorkspaceError`` saying how to fix it, never taken for a plain directory."""
    if not directory.is_dir():
        return None
    found = _git("rev-parse", "--show-toplevel", cwd=directory, owner=owner)
    if found.returncode == 0:
        return Path(found.stdout.strip())
    if DUBIOUS_OWNERSHIP in found.stderr:
        raise _not_a_repository(directory, owner)
    return None


def trust(source: Path) -> str:
    """The commands that make every user's git trust the repository at ``source``."""
    return " && ".join(f"git config --system --add safe.directory {path}"
                       for path in (source, source / ".git"))


def _not_a_repository(source: Path, owner: str | None) -> WorkspaceError:
    """Why git will not treat ``source`` as a repository, in git's words, with the fix.

    "Dubious ownership" (the repository belongs to another user than the one git runs
    as, typically the worker user) is not a missing repository: ``git init`` there
    would be the wrong advice.
    """
    said = _git("rev-parse", "--show-toplevel", cwd=source, owner=owner).stderr.strip()
    if DUBIOUS_OWNERSHIP in said:
        user = owner or pwd.getpwuid(os.geteuid()).pw_name
        first = said.splitlines()[0].removeprefix("fatal: ")
        return WorkspaceError(
            f"git refuses workspace {source} when run as {user}: {first}. Give it to that "
            f"user (chown -R {user} {source}) or, where {user} can write it, let git trust it "
            f"and its git directory, which each task's clone reads (as root: {trust(source)}; "
            "the runner's git reads no user's global configuration)"
        )
    if "not a git repository" in said.lower() or not said:
        return WorkspaceError(
            f"workspace {source} is not a git repository: run 'git init' there and commit once"
        )
    return WorkspaceError(f"workspace {source} cannot be used: git said: {said}")


@dataclass(frozen=True)
class Workspace:
    """The task's worktree, and the worktree of an earlier run it was taken over from.

    ``branch`` is the one checked out there (None for a hosting board's workspace);
    ``folder`` the folder of the repository the task names, where the CLI works.
    """

    path: Path
    taken_over_from: Path | None = None
    branch: str | None = None
    folder: str = ""
    created: bool = False
    """Made by this run (``git worktree add``), not reused or taken over: after_create runs."""
    head: str | None = None
    """The commit a worktree made by this run starts at (None when not known without
    asking git): the run's base, read once instead of again (issue 46)."""

    @property
    def cwd(self) -> Path:
        """Where the CLI works: the task's folder of the worktree."""
        return self.path / self.folder if self.folder else self.path


@dataclass(frozen=True)
class Located:
    """Where a workspace path is: its repository (git's common directory, shared by every
    worktree of it) and its folder inside that repository ("" at the top)."""

    common: Path
    folder: str


@dataclass(frozen=True)
class Repository:
    """What one ``rev-parse`` says of a task's repository before its clone is made: its
    top, where the workspace is in it, its object format (the clone's checkout needs it)
    and the ref its own worktree has checked out ("HEAD" when detached or unborn), which
    may hold the task's branch."""

    top: Path
    located: Located
    object_format: str
    checked_out: str

    def has_linked_worktrees(self) -> bool:
        """Whether git keeps linked worktrees of it (``git worktree add``'s, an older
        runner's or Hermes's): only then can one hold the branch or need pruning."""
        return (self.located.common / "worktrees").is_dir()


class WorkspaceBusy(WorkspaceError):
    """The task's branch is held by the worktree of a run that is still current.

    Not the task's fault and not this run's to take: the run waits and tries again.
    """


RunIsCurrent = takeover.RunIsCurrent


def prepare(
    repository: str | None,
    worktree: Path,
    branch: str,
    owner: str | None = None,
    *,
    run: int | None = None,
    is_current: RunIsCurrent | None = None,
    pooled: bool = False,
    fresh: bool = False,
) -> Workspace:
    """The task's worktree, created on first use and reused after; with ``pooled`` (a
    pool of worker users) ``owner``'s alone (``run/ownership.py``); ``fresh``: no run of
    the task made one yet (what is at its name was planted).

    The fresh path locates the workspace in its repository and makes one ``git
    worktree add``: what is wrong with a workspace is only worked out once that
    fails. When the branch is held by another worktree (a runner that died, or
    another home on the same repository), run ``run`` takes that worktree over,
    unless the run that made it is still current (``is_current``): see ``_take_over``.
    """
    source = Path(repository) if repository else None
    if pooled and owner is not None:
        ownership.hand_over(worktree, owner, fresh=fresh)
    if worktree.is_dir():
        checkout = _checkout(worktree, owner)
        if checkout is not None and checkout[0] == worktree.resolve():
            if _has_commit(worktree, owner) and not interrupted.unfinished(worktree):
                takeover.mark(worktree, run)
                located = _locate(source, owner) if source is not None and source.is_dir() else None
                if located is not None and taskgit.is_clone(worktree):
                    taskgit.register(located.common, worktree, checkout[1], owner)
                return _within(Workspace(worktree, branch=checkout[1]), located, repository)
            _remove_half_made(worktree, owner)
    if source is None:
        raise WorkspaceError(
            "the task has no workspace: file it with --workspace PATH (a git repository)"
        )
    if not source.is_dir():
        raise WorkspaceError(f"workspace {repository} does not exist or is not a directory")
    # Every directory made here is 0700, ``worktrees/`` too (``mkdir(parents=True)`` gives
    # the parents the umask's 0755, which doctor rightly reports).
    if pooled:
        ownership.board_folder(worktree.parent)
    else:
        files.ensure_directory(worktree.parent)
    if owner is not None and not pooled:
        entry = pwd.getpwnam(owner)
        os.chown(worktree.parent, entry.pw_uid, entry.pw_gid)
    where = _where(source, owner)
    with _repository_lock(where.located.common if where else source.resolve()):
        prepared = _create(source, where, worktree, branch, owner, run, is_current)
    if pooled:
        ownership.private(prepared.path)
    takeover.mark(worktree, run)
    return _within(prepared, where.located if where else None, repository)


def _locate(source: Path, owner: str | None) -> Located | None:
    """Where ``source`` is in its repository; None when git does not see one there."""
    said = _git("rev-parse", "--git-common-dir", "--show-prefix", cwd=source, owner=owner)
    lines = said.stdout.splitlines()
    if said.returncode != 0 or not lines or not lines[0]:
        return None
    folder = lines[1].strip("/") if len(lines) > 1 else ""
    return Located((source / lines[0]).resolve(), folder)


def _where(source: Path, owner: str | None) -> Repository | None:
    """``source``'s ``Repository``, from one git call (issue 46: the object format and the
    checked-out branch cost a ``rev-parse`` and a ``worktree list`` of their own); None
    where git sees no worktree there. In a repository without a commit the symbolic name
    fails, last but one: what comes before it is printed, and the folder is not needed (no
    clone is made)."""
    said = _git("rev-parse", "--show-object-format", "--show-toplevel", "--git-common-dir",
                "--symbolic-full-name", "HEAD", "--show-prefix", cwd=source, owner=owner)
    lines = said.stdout.splitlines()
    if len(lines) < 3 or not lines[1] or not lines[2]:
        return None
    whole = said.returncode == 0
    folder = lines[4].strip("/") if whole and len(lines) > 4 else ""
    checked_out = lines[3] if whole and len(lines) > 3 else "HEAD"
    located = Located((source / lines[2]).resolve(), folder)
    return Repository(Path(lines[1]), located, lines[0], checked_out)


def _checkout(worktree: Path, owner: str | None) -> tuple[Path, str] | None:
    """The top of the worktree ``worktree`` is in and the branch checked out there."""
    said = _git("rev-parse", "--show-toplevel", "--abbrev-ref", "HEAD", cwd=worktree, owner=owner)
    lines = said.stdout.splitlines()
    if said.returncode != 0 or len(lines) != 2:
        return None
    return Path(lines[0]), lines[1]


def _has_commit(worktree: Path, owner: str | None) -> bool:
    """Whether the worktree's HEAD names a commit. ``git worktree add`` writes a
    placeholder HEAD (the null id) before it checks the branch out: a runner killed in
    between leaves a worktree git lists but nothing can be committed in."""
    said = _git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=worktree, owner=owner)
    return said.returncode == 0


def _remove_half_made(worktree: Path, owner: str | None) -> None:
    """Remove a worktree whose ``git worktree add`` never finished (``_has_commit``,
    ``interrupted.unfinished``): its checkout never completed, so no run worked in it,
    and it is made afresh. Forced twice:
    ``git worktree add`` keeps its new worktree locked ("initializing") until it is done,
    and a lock refuses a single ``--force``."""
    log.warning("the worktree %s was left half made by git worktree add: made afresh", worktree)
    said = _git(
        "worktree", "remove", "--force", "--force", str(worktree), cwd=worktree, owner=owner
    )
    if said.returncode != 0:
        raise WorkspaceError(
            f"the worktree {worktree} was left half made by an interrupted git worktree add "
            f"and git cannot remove it: {said.stderr.strip()}; remove it by hand "
            "(git worktree remove --force --force) and the task is retried"
        )


def _within(prepared: Workspace, located: Located | None, repository: str | None) -> Workspace:
    """The worktree, working in the folder of the repository the task names (a monorepo's
    service), which the task's branch must have."""
    if located is None or not located.folder:
        return prepared
    if not (prepared.path / located.folder).is_dir():
        raise WorkspaceError(
            f"workspace {repository} is the folder {located.folder} of its repository, which "
            f"the task's branch {prepared.branch} does not have (not committed?): commit it, "
            "or file the task with the repository's own path"
        )
    return replace(prepared, folder=located.folder)


def _repository_lock(common: Path) -> threading.Lock:
    """The lock of the repository whose common directory is ``common``."""
    with _REPOSITORY_LOCKS_GUARD:
        return _REPOSITORY_LOCKS.setdefault(common, threading.Lock())


def check_source(source: Path, owner: str | None = None) -> None:
    """What a run would meet, checked when the task is filed (``task add``, ``task edit``):
    ``source`` is a directory, a git repository with a commit, that git run as ``owner``
    (the worker user, when given) can read. WorkspaceError quotes git's own words.
    """
    if not source.is_dir():
        raise WorkspaceError(f"workspace {source} does not exist or is not a directory")
    said = _git("rev-parse", "--show-toplevel", cwd=source, owner=owner)
    if said.returncode != 0:
        if DUBIOUS_OWNERSHIP in said.stderr:
            raise _not_a_repository(source, owner)
        words = said.stderr.strip() or f"exit status {said.returncode}"
        raise WorkspaceError(
            f"workspace {source} cannot be used{_as(owner)}: git said: {words}"
            + (" (run 'git init' there and commit once)" if "not a git repository" in words else "")
        )
    head = _git("log", "-1", "--format=%H", cwd=source, owner=owner)
    if head.returncode != 0:
        words = head.stderr.strip() or f"exit status {head.returncode}"
        raise WorkspaceError(
            f"workspace {source} has no commit to start a worktree from: git said: {words} "
            "(commit once)"
        )


def _as(owner: str | None) -> str:
    return f" by the worker user {owner}" if owner else ""


def _create(
    source: Path,
    where: Repository | None,
    worktree: Path,
    branch: str,
    owner: str | None,
    run: int | None,
    is_current: RunIsCurrent | None,
) -> Workspace:
    """The task's clone: an earlier run's taken over, else a new one on ``branch`` (or its
    twin, ``_branch_for``) where the repository has it, else at the repository's HEAD."""
    if where is None:
        raise _not_a_repository(source, owner)
    top, common = where.top, where.located.common
    _clear_interrupted(where, worktree, branch, owner)
    known = refs.look_up(top, [*_questions(branch), "HEAD"], owner)
    branch = _branch_for(top, branch, owner, known)
    taken = _take_over(where, worktree, branch, owner, run, is_current)
    if taken is not None:
        return taken
    start = _start(top, branch, known, owner)
    if not start:
        raise WorkspaceError(f"cannot create a worktree of {top}: the repository needs at "
                             "least one commit")
    made = taskgit.clone(top, common, worktree, taskgit.Start(branch, start, where.object_format),
                         owner)
    if made.returncode != 0:
        said = made.stderr.strip() or made.stdout.strip() or f"exit status {made.returncode}"
        raise WorkspaceError(f"cannot create a worktree of {top}: git said: {said}")
    return Workspace(worktree, branch=branch, created=True, head=start)


def _take_over(
    where: Repository, worktree: Path, branch: str, owner: str | None,
    run: int | None, is_current: RunIsCurrent | None,
) -> Workspace | None:
    """The earlier run's worktree holding ``branch`` (``run/takeover.py``), moved here;
    None when there is none (or it could only be removed): a clone is made then."""
    top, common = where.top, where.located.common
    if where.has_linked_worktrees():
        linked = takeover.linked_holder(top, branch, owner)
    else:  # the repository's own worktree is the only one git could name
        linked = top if where.checked_out == f"refs/heads/{branch}" else None
    held = linked or taskgit.holder(common, branch, worktree)
    if held is None:
        return None
    if held.resolve() == worktree.resolve():
        raise WorkspaceError(f"cannot create a worktree of {top}: {worktree} holds {branch} "
                             "but git cannot use it: remove it by hand (git worktree remove "
                             "--force) and the task is retried")
    previous = takeover.still_current(held, run, is_current)
    if previous is not None:
        raise WorkspaceBusy(
            f"branch {branch} is checked out at {held} by run {previous}, which is "
            "still current: this run waits for it to end"
        )
    if linked is not None:
        try:
            moved = takeover.linked(top, held, worktree, branch, owner)
        except takeover.CannotTakeOver as error:
            raise WorkspaceError(str(error)) from error
        return Workspace(worktree, taken_over_from=held, branch=branch) if moved else None
    refused = taskgit.move(common, held, worktree, branch, owner)
    if refused is None:
        log.info("took over %s (branch %s) as %s", held, branch, worktree)
        return Workspace(worktree, taken_over_from=held, branch=branch)
    log.warning("could not move %s (%s): the task's branch is cloned afresh; what is "
                "uncommitted or unpublished there stays there", held, refused)
    taskgit.unregister(common, held)
    return None


def _clear_interrupted(where: Repository, worktree: Path, branch: str, owner: str | None) -> None:
    """What a killed ``git worktree add`` (an older runner's) or clone left in the way goes
    (``run/interrupted.py``); while it is young enough to be another add at work, the run
    waits."""
    found = interrupted.find(where.located.common, worktree, branch)
    young = found.young(time.time())
    if young:
        raise WorkspaceBusy(
            f"git worktree add in {where.top} left {', '.join(map(str, young))} moments ago, "
            "or is still at work: this run waits, and clears what stays"
        )
    interrupted.repair(found)
    if where.has_linked_worktrees():
        # A linked worktree deleted by hand is still registered (and holds its branch).
        _git("worktree", "prune", cwd=where.top, owner=owner)


def _questions(branch: str) -> list[str]:
    """The refs ``_branch_for`` asks about: the twin, the branch, each folder above it."""
    parts = branch.split("/")
    prefixes = ["/".join(parts[:end]) for end in range(1, len(parts))]
    return [f"refs/heads/{name}" for name in (twin_of(branch), branch, *prefixes)]


def _branch_for(
    source: Path, branch: str, owner: str | None, known: Mapping[str, refs.Found] | None = None
) -> str:
    """``branch``, or its twin (``twin_of``) when the repository has the twin already or
    cannot have ``branch`` (a branch named like one of its folders, ``FOLDER_TAKEN``).
    ``known`` is what ``refs.look_up`` found of ``_questions`` (looked up here if not
    given)."""
    twin = twin_of(branch)
    if twin == branch:
        return branch
    if known is None:
        known = refs.look_up(source, _questions(branch), owner)
    if f"refs/heads/{twin}" in known:
        return twin
    if f"refs/heads/{branch}" in known:
        return branch
    if any(name in known for name in _questions(branch)[2:]) or _git(
        "for-each-ref", "--count=1", f"refs/heads/{branch}/", cwd=source, owner=owner
    ).stdout.strip():
        log.info("branch %s cannot be made (%s); the task works on %s", branch,
                 FOLDER_TAKEN, twin)
        return twin
    return branch


def planned_branch(
    repository: str | None, worktree: Path, branch: str, owner: str | None = None
) -> str:
    """The branch ``prepare`` would work on, found without making anything (a dry run):
    the one checked out in the task's worktree, else ``branch`` or its twin as
    ``_branch_for`` would choose them."""
    if worktree.is_dir():
        checkout = _checkout(worktree, owner)
        if checkout is not None and checkout[0] == worktree.resolve():
            return checkout[1]
    source = Path(repository) if repository else None
    if source is None or not source.is_dir():
        return branch
    return _branch_for(source, branch, owner)


def planned_cwd(repository: str | None, worktree: Path, owner: str | None = None) -> Path:
    """Where the CLI would work, found without making anything (a dry run): the task's
    worktree, in the folder of its repository the task names (a monorepo's service)."""
    source = Path(repository) if repository else None
    located = _locate(source, owner) if source is not None and source.is_dir() else None
    return worktree / located.folder if located and located.folder else worktree


def _start(top: Path, branch: str, known: Mapping[str, refs.Found], owner: str | None) -> str:
    """The commit a new clone of ``branch`` starts from: the branch's where the repository
    has it, else HEAD's; "" when neither names a commit. A tip that is not itself a
    commit (a tag object) is peeled as ``rev-parse NAME^{commit}`` peels it."""
    for name in (f"refs/heads/{branch}", "HEAD"):
        found = known.get(name)
        if found is not None and found.kind == "commit":
            return found.sha
        if found is not None:
            peeled = _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}",
                          cwd=top, owner=owner).stdout.strip()
            if peeled:
                return peeled
    return ""


def remove(worktree: Path, owner: str | None = None, *, force: bool = False) -> str | None:
    """Remove the task's worktree (its branch stays); None when gone, else why not.

    Without ``force`` a worktree holding uncommitted changes is refused, and they are
    kept: told by ``snapshot.changes``, since git's own check (a ``git status`` it runs
    inside ``worktree remove``) would run the repository's clean filters, so git is always
    given ``--force``. A locked linked worktree is refused either way; a clone goes with
    its git directory (``taskgit.remove``). What the runner keeps beside it (the run
    marker, the result file's outbox under a pool) goes with it.
    """
    if not worktree.is_dir():
        _forget(worktree)
        return None
    if not force:
        try:
            changed = snapshot.changes(worktree, owner)
        except snapshot.StagingError as error:
            return str(error)
        if changed:
            return f"{worktree} holds uncommitted changes ({len(changed)} path(s)): kept"
    if taskgit.is_clone(worktree):
        try:
            taskgit.remove(worktree)
        except OSError as error:
            return f"cannot remove {worktree}: {error}"
        _forget(worktree)
        return None
    said = _git("worktree", "remove", "--force", str(worktree), cwd=worktree, owner=owner)
    if said.returncode != 0:
        return said.stderr.strip() or said.stdout.strip() or f"exit status {said.returncode}"
    _forget(worktree)
    return None


def _forget(worktree: Path) -> None:
    takeover.marker(worktree).unlink(missing_ok=True)
    ownership.discard_outbox(worktree)
