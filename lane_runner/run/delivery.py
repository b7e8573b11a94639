"""The accepted result as git: a commit on the task's branch (docs/ARCHITECTURE.md §6).

Before a result goes to the journal, whatever the worker left uncommitted in the
worktree is committed on the task's branch, with the task's title and the worker's
summary as the message and trailers naming the task, run, provider and model. The
commit is made exactly once: its trailers let a later run find it again after a
crash (``find``) instead of making a second one. A worker that committed by itself
is respected: its commits are the result. Nothing to commit is a valid result too.

The commit also carries the accepted result itself (``Carried``: a bounded block
before the trailers), so any runner of the board that meets the branch can deliver
a result whose own runner died before its journal had it, without a second CLI run
(``run/undelivered.py``). So the runner's commit is made even when the worktree
holds nothing uncommitted (an empty commit): every accepted result has one.

What reviewers see of it (``Delivered``: branch, commits, diff stat) goes into the
result's metadata, and so into the board's completed event.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import subprocess
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from lane_runner.errors import LaneRunnerError
from lane_runner.router.route import bounded
from lane_runner.run import git, gitlock, snapshot, taskgit

log = logging.getLogger(__name__)
TASK_TRAILER = "Lane-Task"
RUN_TRAILER = "Lane-Run"
#: The lines around the carried result in a commit message (``Carried``).
CARRIED_BEGIN = "-----BEGIN LANE-RUNNER RESULT-----"
CARRIED_END = "-----END LANE-RUNNER RESULT-----"
#: The most a carried block may take: a fitted result (``run/fit.py``) with its metadata
#: is far under it once compressed; one that is not is left out of the commit (logged),
#: and only the lane state of its home keeps it.
MAX_CARRIED_CHARS = 1 << 20
CARRIED_LINE = 76
MAX_TITLE_CHARS = 200
MAX_SUMMARY_CHARS = 16_000
#: Commits of the branch looked through for the run's own, when its base is unknown.
SEARCH_DEPTH = 200
MAX_COMMITS_LISTED = 100
MAX_DIFFSTAT_CHARS = 4000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SHORTSTAT = re.compile(r"(\d+) (file|insertion|deletion)")


class DeliveryError(LaneRunnerError):
    """git would not take the result (a worktree mid-merge, a read-only repository)."""


@dataclass(frozen=True)
class Author:
    """Who the runner's commits are by (config ``commit_author``: ``Name <email>``)."""

    name: str
    email: str

    @classmethod
    def of(cls, identity: str) -> Author:
        """The author ``commit_author`` names (config has checked its ``Name <email>`` form)."""
        name, _, email = identity.rpartition(" <")
        return cls(name, email.removesuffix(">"))

    def environment(self) -> dict[str, str]:
        """git's identity variables: they win over any user.name in the worker's config."""
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }


@dataclass(frozen=True)
class Carried:
    """The accepted result as its commit carries it: what a runner of another home needs
    to complete the board with it (the result, the completed event's metadata, and the
    commit the task's branch started from, for the event's diff).

    In the message, not in a git note: the commit and its block are one object, made
    at once, so a runner killed anywhere in ``git commit`` (its post-commit hook) leaves
    either both or neither; a note would be a second write after it. It travels with the
    branch (a push, a fetch) and lives as long as the commit does. Compressed and in
    base64, so no line of it can pass for a trailer or be changed by git's message
    cleanup, and a reviewer sees a block of bounded size, not the answer a second time.
    """

    result: dict[str, Any]
    metadata: dict[str, Any]
    base: str | None

    def block(self) -> str | None:
        """The block for the message; None when it would be over ``MAX_CARRIED_CHARS``."""
        document = {"format": 1, "result": self.result, "metadata": self.metadata,
                    "base": self.base}
        packed = base64.b64encode(zlib.compress(orjson.dumps(document), 9)).decode()
        if len(packed) > MAX_CARRIED_CHARS:
            log.warning("the accepted result takes %d characters packed, over %d: its commit "
                        "does not carry it", len(packed), MAX_CARRIED_CHARS)
            return None
        lines = [packed[i : i + CARRIED_LINE] for i in range(0, len(packed), CARRIED_LINE)]
        return "\n".join([CARRIED_BEGIN, *lines, CARRIED_END])

    @classmethod
    def read(cls, message: str) -> Carried | None:
        """The result the message's last block carries; None when it has none or the block
        is not one this runner wrote whole (cut, edited, of another format). A block the
        worker's summary quotes is not read: ``message`` writes its markers in lower case."""
        end = message.rfind(CARRIED_END)
        begin = message.rfind(CARRIED_BEGIN, 0, end)
        if begin < 0 or end < 0:
            return None
        packed = "".join(message[begin + len(CARRIED_BEGIN) : end].split())
        try:
            raw = zlib.decompressobj().decompress(
                base64.b64decode(packed, validate=True), MAX_CARRIED_CHARS * 4
            )
            document = orjson.loads(raw)
        except (binascii.Error, zlib.error, orjson.JSONDecodeError) as error:
            log.warning("a result commit's carried block is unreadable: %s", error)
            return None
        if not (
            isinstance(document, dict)
            and document.get("format") == 1
            and isinstance(document.get("result"), dict)
            and isinstance(document.get("metadata"), dict)
            and isinstance(document.get("base"), str | None)
        ):
            log.warning("a result commit's carried block is not of format 1")
            return None
        return cls(document["result"], document["metadata"], document["base"])


@dataclass(frozen=True)
class Facts:
    """What the commit says: whose result it is and how it was reached, and the result
    itself (``carried``) for whichever runner delivers it."""

    board: str
    task_id: str
    run_id: int
    title: str
    summary: str
    provider: str
    model: str
    carried: Carried | None = None

    def trailers(self) -> list[tuple[str, str]]:
        """The commit's trailers, in order. A cost trailer joins them once the usage
        ledger exists; ``find`` reads only the task and the run."""
        return [
            (TASK_TRAILER, f"{self.board}/{self.task_id}"),
            (RUN_TRAILER, str(self.run_id)),
            ("Lane-Provider", self.provider),
            ("Lane-Model", self.model),
        ]

    def message(self) -> str:
        """Title, summary, the carried result, trailers; control characters escaped, each
        part bounded."""
        title = _quoted(bounded(self.title, MAX_TITLE_CHARS) or f"task {self.task_id}")
        summary = _quoted(printable(self.summary.strip(), MAX_SUMMARY_CHARS))
        trailers = "\n".join(f"{key}: {bounded(value)}" for key, value in self.trailers())
        block = self.carried.block() if self.carried is not None else None
        carried = f"{block}\n\n" if block else ""
        return f"{title}\n\n{summary}\n\n{carried}{trailers}\n"


def _quoted(text: str) -> str:
    """``text`` with the carried block's markers in lower case: a block a title or a
    worker's summary quotes is never taken for the runner's (``Carried.read``)."""
    for marker in (CARRIED_BEGIN, CARRIED_END):
        text = text.replace(marker, marker.lower())
    return text


@dataclass(frozen=True)
class Delivered:
    """The branch as the result left it, for reviewers and for the board's event."""

    branch: str
    base: str | None
    head: str | None
    commit: str | None
    """The runner's own commit (empty when the worker left nothing uncommitted)."""
    commits: tuple[str, ...]
    """Every commit on the branch since ``base``, oldest first (at most ``MAX_COMMITS_LISTED``)."""
    diffstat: str
    files_changed: int = 0
    insertions: int = 0
    deletions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "base": self.base,
            "head": self.head,
            "commit": self.commit,
            "commits": list(self.commits),
            "diffstat": self.diffstat,
            "files_changed": self.files_changed,
            "insertions": self.insertions,
            "deletions": self.deletions,
        }


def deliver(
    worktree: Path,
    branch: str,
    base: str | None,
    facts: Facts,
    author: Author,
    owner: str | None = None,
    staged: snapshot.Staged | None = None,
    *,
    made_before: bool = True,
) -> Delivered:
    """The result as a commit on ``branch``: found again when a crash came after it was
    made (its trailers name the task and run), else made now from whatever the worktree
    holds uncommitted (an empty commit when it holds nothing: it still carries the result).
    Then the branch's head is put on ``branch`` of the repository the task's clone shares
    objects with (``taskgit.publish``), where the board's record of it points.
    ``made_before`` False: the caller knows no commit of this run can exist yet (not
    searched for)."""
    made = (find(worktree, base, facts.board, facts.task_id, facts.run_id, owner)
            if made_before else None)
    tip = None
    if made is None:
        where = _place(worktree, owner)
        # a killed git's locks, or nothing commits
        gitlock.clear_stale(worktree, branch, owner, (where.git_dir, where.common))
        made = tip = commit(worktree, facts.message(), author, owner, staged, where)
    delivered = describe(worktree, branch, base, made, owner, tip=tip)
    if delivered.head is not None:
        try:
            taskgit.publish(worktree, branch, delivered.head, owner)
        except taskgit.PublishError as error:
            raise DeliveryError(str(error)) from error
    return delivered


def head(worktree: Path, owner: str | None = None) -> str | None:
    """The commit checked out in ``worktree``; None in a repository without one."""
    said = git.run("rev-parse", "--verify", "--quiet", "HEAD", cwd=worktree, owner=owner)
    if said.returncode != 0:
        return None
    return said.stdout.strip() or None


def find(
    worktree: Path, base: str | None, board: str, task_id: str, run_id: int, owner: str | None
) -> str | None:
    """The commit on the branch since ``base`` whose trailers name this task and run."""
    wanted = {TASK_TRAILER: f"{board}/{task_id}", RUN_TRAILER: str(run_id)}
    for sha, body in _log(worktree, base, owner):
        trailers = _trailers(body)
        if all(trailers.get(key) == value for key, value in wanted.items()):
            return sha
    return None


def commit(
    worktree: Path, message: str, author: Author, owner: str | None,
    staged: snapshot.Staged | None = None, where: snapshot.Place | None = None,
) -> str | None:
    """Commit everything the worktree holds uncommitted, or nothing (an empty commit: it
    carries the result, see ``Carried``); the new commit.

    Plumbing only, so none of the repository's code runs inside the runner's commit
    (issue 47): the worktree is staged without filters (``run/snapshot.py``), the commit
    made by ``commit-tree`` (no ``pre-commit``, ``prepare-commit-msg``, ``commit-msg`` or
    ``post-commit``: the result is accepted already, and the operator's checks belong in
    lane hooks) and HEAD's branch moved by ``update-ref`` from the commit it was at (its
    ``reference-transaction`` hook is off with every other, ``run/git.py``). Then
    ``made`` checks that the branch names that commit and that it holds the tree staged.
    ``staged``: the reviewer's staging of this run, whose tree is reused while the worktree
    holds exactly what it staged (``snapshot.stage``); ``where``: the worktree's place,
    when the caller read it (its HEAD the parent: ``update-ref`` moves the branch only
    from that commit).
    """
    where = where or _place(worktree, owner)
    try:
        taken, tree = snapshot.stage(worktree, owner, staged, top=where.top)
    except snapshot.StagingError as error:
        raise DeliveryError(str(error)) from error
    parent = where.head
    made = _checked(git.run(
        "commit-tree", "--no-gpg-sign", tree, *(["-p", parent] if parent else []),
        cwd=taken.top, owner=owner, env=author.environment(), stdin=cleaned(message),
    ), "commit the result").stdout.strip()
    title = message.partition("\n")[0]
    _checked(git.run("update-ref", "-m", f"commit (lane-runner): {title}", "HEAD", made,
                     parent or "", cwd=taken.top, owner=owner), "put the result on the branch")
    return checked_commit(taken.top, made, tree, owner)


def _place(worktree: Path, owner: str | None) -> snapshot.Place:
    try:
        return snapshot.place(worktree, owner)
    except snapshot.StagingError as error:
        raise DeliveryError(str(error)) from error


def checked_commit(worktree: Path, made: str, tree: str, owner: str | None) -> str:
    """``made`` when HEAD names it and it holds ``tree`` (what the runner staged); else
    ``DeliveryError`` saying what is there instead."""
    said = git.run("rev-parse", "HEAD", f"{made}^{{tree}}", cwd=worktree, owner=owner)
    found = said.stdout.split() if said.returncode == 0 else []
    at, holds = (found + ["nothing", "nothing"])[:2]
    if at != made:
        raise DeliveryError(
            f"HEAD is at {at[:12]}, not at the result commit {made[:12]} the runner just made: "
            "something moved the branch meanwhile"
        )
    if holds != tree:
        raise DeliveryError(
            f"the result commit {made[:12]} holds tree {holds[:12]}, not the tree {tree[:12]} "
            "the runner staged"
        )
    return made


def cleaned(message: str) -> str:
    """``message`` as ``git commit --file`` cleans it (``--cleanup=whitespace``): trailing
    blanks cut, runs of empty lines made one, none at either end. ``commit-tree`` takes
    the message as given."""
    lines = [line.rstrip(" \t\v\f\r") for line in message.split("\n")]
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join(kept) + "\n"


def describe(
    worktree: Path,
    branch: str,
    base: str | None,
    made: str | None,
    owner: str | None = None,
    *,
    tip: str | None = None,
) -> Delivered:
    """What the branch holds since ``base``: its commits and the diff stat of them all.
    ``tip`` is HEAD when the caller has just checked it (``commit``), else it is read."""
    tip = tip or head(worktree, owner)
    if base is None or tip is None or base == tip:
        return Delivered(branch, base, tip, made, (), "")
    listed = git.run(
        "rev-list", "--reverse", f"--max-count={MAX_COMMITS_LISTED}", f"{base}..{tip}",
        cwd=worktree, owner=owner,
    )
    stat = git.run("diff-tree", "-r", "-M", "--stat=100", *git.DIFF, base, tip,
                   cwd=worktree, owner=owner)
    diffstat = stat.stdout.rstrip() if stat.returncode == 0 else ""
    counts = _shortstat(diffstat.splitlines()[-1] if diffstat else "")
    if len(diffstat) > MAX_DIFFSTAT_CHARS:
        diffstat = diffstat[:MAX_DIFFSTAT_CHARS] + "\n[diff stat cut]"
    return Delivered(
        branch, base, tip, made, tuple(listed.stdout.split()), diffstat,
        counts.get("file", 0), counts.get("insertion", 0), counts.get("deletion", 0),
    )


@dataclass(frozen=True)
class ResultCommit:
    """A runner's result commit of a task, as the branch holds it."""

    sha: str
    run_id: int


def result_commits(
    worktree: Path, board: str, task_id: str, owner: str | None = None
) -> list[ResultCommit]:
    """The commits among the latest ``SEARCH_DEPTH`` of the branch checked out in
    ``worktree`` whose trailers name the task, newest first. Only the trailers are read
    (a carried block is read by ``carried``, for the one commit that is delivered)."""
    task = f"{board}/{task_id}"
    said = git.run(
        "log", f"--max-count={SEARCH_DEPTH}", "--format=%H%x1f%(trailers:only,unfold)%x1e",
        "HEAD", cwd=worktree, owner=owner,
    )
    if said.returncode != 0:
        return []
    found = []
    for record in said.stdout.split("\x1e"):
        sha, _, lines = record.strip("\n").partition("\x1f")
        trailers = _trailers(lines)
        run = trailers.get(RUN_TRAILER, "")
        if sha and trailers.get(TASK_TRAILER) == task and run.isdecimal():
            found.append(ResultCommit(sha, int(run)))
    return found


def carried(worktree: Path, sha: str, owner: str | None = None) -> Carried | None:
    """The accepted result commit ``sha`` carries (``Carried``), if it carries one."""
    said = git.run("log", "-1", "--format=%B", sha, cwd=worktree, owner=owner)
    return Carried.read(said.stdout) if said.returncode == 0 else None


def commit_log(worktree: Path, base: str | None, owner: str | None = None) -> str:
    """The branch's commits since ``base``, one line each, for the next turn's handoff."""
    if base is None:
        return ""
    said = git.run(
        "log", "--oneline", f"--max-count={MAX_COMMITS_LISTED}", f"{base}..HEAD",
        cwd=worktree, owner=owner,
    )
    return said.stdout.strip() if said.returncode == 0 else ""


def _log(worktree: Path, base: str | None, owner: str | None) -> list[tuple[str, str]]:
    """(sha, message) of the branch's commits since ``base``, newest first."""
    span = [f"{base}..HEAD"] if base else [f"--max-count={SEARCH_DEPTH}", "HEAD"]
    said = git.run("log", "--format=%H%x1f%B%x1e", *span, cwd=worktree, owner=owner)
    if said.returncode != 0:
        return []
    found = []
    for record in said.stdout.split("\x1e"):
        sha, _, body = record.strip("\n").partition("\x1f")
        if sha:
            found.append((sha, body))
    return found


def _trailers(body: str) -> Mapping[str, str]:
    """The ``Key: value`` lines of a message's last paragraph."""
    paragraphs = [p for p in body.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return {}
    trailers = {}
    for line in paragraphs[-1].splitlines():
        key, separator, value = line.partition(": ")
        if separator:
            trailers[key.strip()] = value.strip()
    return trailers


def _shortstat(line: str) -> dict[str, int]:
    """``3 files changed, 10 insertions(+), 2 deletions(-)`` as counts by kind."""
    return {kind: int(number) for number, kind in _SHORTSTAT.findall(line)}


def printable(text: str, limit: int) -> str:
    """``text`` with control characters other than newline and tab written as ``\\xNN``
    (a commit message or a hook's variable is read in terminals), cut at ``limit``."""
    shown = _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return shown if len(shown) <= limit else shown[:limit] + "\n[cut]"


def _checked(
    result: subprocess.CompletedProcess[str], what: str
) -> subprocess.CompletedProcess[str]:
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
        raise DeliveryError(f"git could not {what}: {said}")
    return result
