"""The worktree as the runner stages it: git's plumbing, never the repository's filters.

``git add``, ``git status`` and ``git diff`` against the worktree hash a file through the
clean filter its attributes name (``filter=<driver>`` in ``.gitattributes`` or
``.git/info/attributes``, the driver's command in ``.git/config``): code of whoever can
write those files, which is every task of the repository (issue 47). Overriding the
driver with ``-c filter.<name>.clean=`` cannot be sound, as the worker chooses the names
and can add one between any listing and the command. So the runner never asks git to
convert a worktree file at all:

- the paths come from ``git ls-files`` (the index's entries and the untracked files
  ``.gitignore`` leaves), which lists and never reads a file's content;
- each path's kind is looked at here without following a link (``_Kinds``): a regular
  file, its executable bit, a symbolic link and its target; anything else (a FIFO, a
  device, a path behind a link) is not staged, as ``git add`` would not stage it;
- a regular file's blob is ``git hash-object --no-filters``, which reads no attribute and
  so runs no filter and no end-of-line conversion: the blob is the file's bytes;
- a link's blob is its target, hashed from the runner's own bytes.

What is staged is therefore exactly what the worktree holds, byte for byte, and
``written`` checks the tree git wrote from the index against that list (another task
could rewrite the index in between while repositories are shared). Gitlinks
(submodules) and sparse-checkout (skip-worktree) entries are kept as the index has them.
Every file is hashed each time (git's stat cache is in the index, which the worker
writes, and a forged cache entry would stage a blob the file does not hold).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lane_runner.errors import LaneRunnerError
from lane_runner.run import git

log = logging.getLogger(__name__)
REGULAR = "100644"
EXECUTABLE = "100755"
LINK = "120000"
GITLINK = "160000"
#: ``git ls-files -t`` tags an entry outside a sparse checkout with S.
SKIP_WORKTREE = "S"
#: ... and an untracked file with ``? `` (``--others``).
OTHER = "? "
_OPEN_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_QUOTED = {value: key for key, value in _ESCAPES.items()}


class StagingError(LaneRunnerError):
    """git could not stage the worktree, or wrote a tree other than the one staged."""


@dataclass(frozen=True, order=True)
class Entry:
    """One path as a tree holds it: its path (bytes, as the file system names it), mode
    and object."""

    path: bytes
    mode: str
    sha: str

    def line(self) -> str:
        """The entry as ``git update-index --index-info`` reads it."""
        return f"{self.mode} {self.sha}\t{quote(self.path)}\n"


def unquote(text: str) -> bytes:
    """A path as git prints it (C-quoted when it holds a byte outside printable ASCII, with
    ``core.quotePath`` on, as ``run/git.py`` sets it) back to its bytes."""
    if not (text.startswith('"') and text.endswith('"') and len(text) >= 2):
        return text.encode()
    body, out, index = text[1:-1], bytearray(), 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out += char.encode()
            index += 1
        elif body[index + 1] in _ESCAPES:
            out.append(_ESCAPES[body[index + 1]])
            index += 2
        else:
            out.append(int(body[index + 1 : index + 4], 8))
            index += 4
    return bytes(out)


def quote(path: bytes) -> str:
    """``path`` C-quoted as git reads it on a line (``hash-object --stdin-paths``,
    ``update-index --index-info``): always quoted, so no byte of it is taken as syntax."""
    parts = []
    for byte in path:
        if byte in _QUOTED:
            parts.append("\\" + _QUOTED[byte])
        elif 0x20 <= byte < 0x7F:
            parts.append(chr(byte))
        else:
            parts.append(f"\\{byte:03o}")
    return '"' + "".join(parts) + '"'


@dataclass(frozen=True)
class Snapshot:
    """The worktree as it would be committed (``entries``), and the index's entries it
    replaces (``indexed``: path → whether the entry stays as the index has it)."""

    top: Path
    entries: tuple[Entry, ...]
    indexed: frozenset[bytes]


@dataclass(frozen=True)
class Staged:
    """A staging (``stage``): the snapshot staged and the tree git wrote, checked to hold
    it. A later staging of the same worktree in the same run (the commit after the review)
    takes it as ``known`` and reuses its tree while the worktree holds exactly that."""

    snapshot: Snapshot
    tree: str

    def holds(self, now: Snapshot) -> bool:
        """The worktree now is what was staged, and the index names what it was left with:
        every blob hashed again from the files (the worker writes the index's stat cache,
        so nothing is taken from it) and found the same."""
        return (now.top == self.snapshot.top and now.entries == self.snapshot.entries
                and now.indexed == {entry.path for entry in now.entries})


def take(
    worktree: Path, owner: str | None, *, write: bool, top: Path | None = None
) -> Snapshot:
    """The worktree's entries, blobs written to the object store when ``write``; ``top``:
    the worktree's top folder, when an earlier staging of this run found it."""
    top = top or toplevel(worktree, owner)
    kept, indexed, listed = _listing(top, owner)
    paths = sorted({*indexed, *listed} - {entry.path for entry in kept})
    regular: list[tuple[bytes, str]] = []
    links: list[tuple[bytes, bytes]] = []
    with _Kinds(top) as kinds:
        for path in paths:
            found = kinds.of(path)
            if isinstance(found, bytes):
                links.append((path, found))
            elif found is not None:
                regular.append((path, found))
    entries = [*kept, *_hashed(top, owner, regular, write), *_linked(top, owner, links, write)]
    return Snapshot(top, tuple(sorted(entries)), frozenset(indexed))


def stage(
    worktree: Path, owner: str | None, known: Staged | None = None, top: Path | None = None
) -> tuple[Snapshot, str]:
    """Stage the worktree as it is into its index, without filters; the snapshot staged
    and the tree git wrote, checked to hold exactly that snapshot. With ``known`` (this
    run's earlier staging) and the worktree still exactly that, its tree is the answer:
    the index update, the tree's writing and its check (three git calls) are not made
    again. ``top``: the worktree's top folder, when the caller read it (``place``)."""
    taken = take(worktree, owner, write=True,
                 top=top or (known.snapshot.top if known else None))
    if known is not None and known.holds(taken):
        return taken, known.tree
    gone = sorted(taken.indexed - {entry.path for entry in taken.entries})
    if gone:
        _checked(git.run("update-index", "--force-remove", "--stdin", cwd=taken.top,
                         owner=owner, stdin="".join(f"{quote(path)}\n" for path in gone)),
                 "take the deleted files out of the index")
    _checked(git.run("update-index", "--index-info", cwd=taken.top, owner=owner,
                     stdin="".join(entry.line() for entry in taken.entries)),
             "stage the worktree")
    said = _checked(git.run("write-tree", cwd=taken.top, owner=owner), "write the staged tree")
    tree = said.stdout.strip()
    differs = difference(taken.entries, tree_entries(taken.top, tree, owner))
    if differs:
        raise StagingError(
            f"the tree git wrote from the index ({tree[:12]}) is not what the runner staged "
            f"({differs}): something changed the index meanwhile"
        )
    return taken, tree


def changes(worktree: Path, owner: str | None) -> list[str]:
    """The worktree against HEAD, one ``git status --short``-like line a path (`` M``,
    ``??``, ``A ``, `` D``), found without filters; nothing is written."""
    taken = take(worktree, owner, write=False)
    head = {e.path: e for e in tree_entries(taken.top, "HEAD", owner, missing_ok=True)}
    now = {e.path: e for e in taken.entries}
    lines = []
    for path in sorted({*head, *now}):
        shown = os.fsdecode(path)
        if path not in now:
            lines.append(f" D {shown}")
        elif path not in head:
            lines.append(f"A  {shown}" if path in taken.indexed else f"?? {shown}")
        elif head[path] != now[path]:
            lines.append(f" M {shown}")
    return lines


def summary(changed: list[str]) -> str:
    """How many paths ``changes`` found, by kind: the runner's git never diffs the worktree
    itself (that would run the repository's filters); the next agent runs ``git diff``."""
    kinds = {" M": "modified", " D": "deleted", "A ": "added", "??": "untracked"}
    counted = {kind: sum(line.startswith(tag) for line in changed) for tag, kind in kinds.items()}
    said = [f"{count} {kind}" for kind, count in counted.items() if count]
    return f"{len(changed)} path(s) changed: {', '.join(said)}" if said else "(no changes)"


def difference(staged: tuple[Entry, ...], written: list[Entry]) -> str:
    """The first path where a written tree differs from what was staged, in words; empty
    when it holds exactly that."""
    one, other = {e.path: e for e in staged}, {e.path: e for e in written}
    for path in sorted({*one, *other}):
        if one.get(path) != other.get(path):
            mine = one.get(path)
            theirs = other.get(path)
            return (f"{os.fsdecode(path)}: staged {_said(mine)}, the tree holds {_said(theirs)}")
    return ""


def _said(entry: Entry | None) -> str:
    return "nothing" if entry is None else f"{entry.mode} {entry.sha[:12]}"


@dataclass(frozen=True)
class Place:
    """Where a worktree's git stands, read by one ``rev-parse`` before the result's
    commit (it was three, each a supervised process tree: bench/FINDINGS.md): its top
    folder, its git directory and the repository's common one (``run/gitlock.py``), and
    the commit HEAD names, the new commit's parent (None before the first)."""

    top: Path
    git_dir: Path
    common: Path
    head: str | None


def place(worktree: Path, owner: str | None) -> Place:
    """The ``Place`` of ``worktree``; StagingError when git finds no worktree there. An
    unborn HEAD fails ``--verify`` after the folders are printed: no parent then."""
    said = git.run("rev-parse", "--absolute-git-dir", "--git-common-dir", "--show-toplevel",
                   "--verify", "--quiet", "HEAD", cwd=worktree, owner=owner)
    lines = said.stdout.splitlines()
    if len(lines) < 3:
        _checked(said, "find the worktree's top folder")
        raise StagingError(f"git could not find the worktree's top folder: {said.stdout!r}")
    head = lines[3].strip() if said.returncode == 0 and len(lines) > 3 else None
    return Place(Path(lines[2]), Path(os.path.realpath(lines[0])),
                 Path(os.path.realpath(worktree / lines[1])), head or None)


def toplevel(worktree: Path, owner: str | None) -> Path:
    """The worktree's top folder (the runner may be handed a folder inside it)."""
    said = _checked(git.run("rev-parse", "--show-toplevel", cwd=worktree, owner=owner),
                    "find the worktree's top folder")
    return Path(said.stdout.strip())


def tree_entries(
    top: Path, tree: str, owner: str | None, *, missing_ok: bool = False
) -> list[Entry]:
    """Every entry of ``tree`` (a tree or a commit), recursively."""
    said = git.run("ls-tree", "-r", "--full-tree", tree, "--", cwd=top, owner=owner)
    if said.returncode != 0 and missing_ok:
        return []
    entries = []
    for line in _checked(said, f"list {tree}").stdout.splitlines():
        meta, _, path = line.partition("\t")
        mode, _kind, sha = meta.split()
        entries.append(Entry(unquote(path), mode, sha))
    return entries


def _listing(top: Path, owner: str | None) -> tuple[list[Entry], set[bytes], list[bytes]]:
    """The index's entries kept as they are (gitlinks, skip-worktree), every path it names,
    and the untracked files ``.gitignore`` leaves: one ``ls-files`` (each git call is a
    supervised process tree, bench/FINDINGS.md), its index entries tagged and staged
    (``H 100644 <sha> 0<TAB>path``), the untracked ones ``? path`` (a path with a tab is
    C-quoted, so only an index entry's line holds one)."""
    said = _checked(git.run("ls-files", "--stage", "-t", "--others", "--exclude-standard",
                            cwd=top, owner=owner), "list the index and the worktree")
    kept: dict[bytes, Entry] = {}
    named: set[bytes] = set()
    untracked: list[bytes] = []
    for line in said.stdout.splitlines():
        meta, tab, quoted = line.partition("\t")
        if not tab:
            # An untracked repository inside the worktree is listed as its folder: not
            # staged (``git add`` would make it a gitlink whose commits nobody has).
            if not line.endswith("/"):
                untracked.append(unquote(line.removeprefix(OTHER)))
            continue
        tag, mode, sha, _stage = meta.split()
        path = unquote(quoted)
        named.add(path)
        if mode == GITLINK or tag == SKIP_WORKTREE:
            kept[path] = Entry(path, mode, sha)
    return list(kept.values()), named, untracked


def _hashed(
    top: Path, owner: str | None, regular: list[tuple[bytes, str]], write: bool
) -> list[Entry]:
    """Blobs of the regular files, as their bytes are (``--no-filters``)."""
    if not regular:
        return []
    paths = "".join(f"{quote(path)}\n" for path, _mode in regular)
    said = _checked(
        git.run("hash-object", *(["-w"] if write else []), "--no-filters", "--stdin-paths",
                cwd=top, owner=owner, stdin=paths),
        "hash the worktree's files",
    )
    shas = said.stdout.split()
    if len(shas) != len(regular):
        raise StagingError(f"git hashed {len(shas)} of the worktree's {len(regular)} files")
    return [Entry(path, mode, sha) for (path, mode), sha in zip(regular, shas, strict=True)]


def _linked(
    top: Path, owner: str | None, links: list[tuple[bytes, bytes]], write: bool
) -> list[Entry]:
    """Blobs of the symbolic links: their targets, as ``git add`` stores them."""
    entries = []
    for path, target in links:
        said = _checked(
            git.run("hash-object", *(["-w"] if write else []), "--no-filters", "--stdin",
                    cwd=top, owner=owner, stdin=target),
            "hash a symbolic link",
        )
        entries.append(Entry(path, LINK, said.stdout.strip()))
    return entries


class _Kinds:
    """What a path of the worktree is, looked at without following any link: each folder
    on the way is opened ``O_PATH|O_NOFOLLOW`` (nothing is read, a FIFO never waited on),
    the entry ``lstat``-ed in it. A path behind a link is not the worktree's."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.folders: dict[bytes, int | None] = {}

    def __enter__(self) -> _Kinds:
        return self

    def __exit__(self, *_exc: object) -> None:
        for fd in self.folders.values():
            if fd is not None:
                os.close(fd)

    def of(self, path: bytes) -> str | bytes | None:
        """A regular file's mode, a link's target, or None (anything else, or gone)."""
        folder, _, name = path.rpartition(b"/")
        fd = self._folder(folder)
        if fd is None or not name:
            return None
        try:
            status = os.lstat(name, dir_fd=fd)
            if stat.S_ISLNK(status.st_mode):
                return os.readlink(name, dir_fd=fd)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("%s: %s, so it is not staged", self.top / os.fsdecode(path), error)
            return None
        if not stat.S_ISREG(status.st_mode):
            return None
        return EXECUTABLE if status.st_mode & stat.S_IXUSR else REGULAR

    def _folder(self, folder: bytes) -> int | None:
        if folder in self.folders:
            return self.folders[folder]
        parent, _, name = folder.rpartition(b"/")
        fd: int | None = None
        try:
            if not folder:
                fd = os.open(self.top, _OPEN_DIRECTORY)
            else:
                above = self._folder(parent)
                if above is not None:
                    fd = os.open(name, _OPEN_DIRECTORY, dir_fd=above)
        except OSError as error:  # a link, a file, gone: nothing in it is staged
            log.debug("%s is not a folder of the worktree: %s", folder, error)
        self.folders[folder] = fd
        return fd


def _checked(
    result: subprocess.CompletedProcess[str], what: str
) -> subprocess.CompletedProcess[str]:
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
        raise StagingError(f"git could not {what}: {said}")
    return result

